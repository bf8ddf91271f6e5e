// A gettext .po file as the po.LANG.js Cockpit loads for a page: `cockpit.locale({...})` with the
// header's plural rule and every translated message, [context-]msgid -> [msgid_plural, msgstr...], as
// Cockpit's own po.LANG.js files are. Untranslated and fuzzy messages are left out (the English shows).
function unquote(s) {
    return JSON.parse(s.replace(/\\([^"\\ntr])/g, "\\\\$1"));
}

export function parsePo(text) {
    const entries = [];
    let cur = null;
    let field = null;
    const flush = () => { if (cur && cur.msgid !== undefined) entries.push(cur); cur = null; field = null; };
    for (const raw of text.split("\n")) {
        const line = raw.trim();
        if (line === "") { flush(); continue; }
        if (!cur) cur = { msgstr: [], flags: [] };
        if (line.startsWith("#,")) { cur.flags.push(...line.slice(2).split(",").map(s => s.trim())); continue; }
        if (line.startsWith("#")) continue;
        const m = line.match(/^(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s+(".*")$/);
        if (m) {
            field = m[2] !== undefined ? ["msgstr", Number(m[2])] : [m[1], null];
            const value = unquote(m[3]);
            if (field[0] === "msgstr") cur.msgstr[field[1] ?? 0] = value; else cur[field[0]] = value;
        } else if (line.startsWith("\"") && field) {
            const value = unquote(line);
            if (field[0] === "msgstr") cur.msgstr[field[1] ?? 0] += value; else cur[field[0]] += value;
        } else {
            throw new Error(`cannot read po line: ${raw}`);
        }
    }
    flush();
    return entries;
}

export function poToJs(text, lang) {
    const entries = parsePo(text);
    const header = entries.find(e => e.msgid === "");
    const rule = ((header && header.msgstr[0]) || "").match(/Plural-Forms:.*plural=([^;\n]+)/);
    const plural = rule ? rule[1].trim() : "n != 1";
    if (!/^[n\s\d()!=<>&|?:%+-]+$/.test(plural))
        throw new Error(`unexpected plural rule: ${plural}`);
    const out = [];
    for (const e of entries) {
        if (e.msgid === "" || e.flags.includes("fuzzy") || !e.msgstr.length || e.msgstr.some(s => !s))
            continue;
        const key = (e.msgctxt !== undefined ? e.msgctxt + "\u0004" : "") + e.msgid;
        out.push(`${JSON.stringify(key)}:${JSON.stringify([e.msgid_plural ?? null, ...e.msgstr])}`);
    }
    const head = `"":{"plural-forms":function(n){return ${plural};},"language":${JSON.stringify(lang)},"language-direction":"ltr"}`;
    return `cockpit.locale({${[head, ...out].join(",\n")}});\n`;
}
