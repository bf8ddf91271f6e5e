/* PatternFly's dark theme when Cockpit's is dark, as Cockpit's own pages follow it: the shell keeps the
 * choice ("dark", "light" or "auto": the browser's preference) in localStorage under "shell:style" and
 * tells the open frames of a change with a "cockpit-style" event; another window changes it through the
 * "storage" event. */
export const DARK = "pf-v5-theme-dark";

function dark(style) {
    const chosen = style || localStorage.getItem("shell:style") || "auto";
    const prefers = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
    return chosen === "dark" || (chosen === "auto" && prefers);
}

function apply(style) {
    document.documentElement.classList.toggle(DARK, dark(style));
}

export function followCockpitStyle() {
    window.addEventListener("storage", event => {
        if (event.key === "shell:style")
            apply();
    });
    window.addEventListener("cockpit-style", event => {
        if (event instanceof CustomEvent && event.detail)
            apply(event.detail.style);
    });
    if (window.matchMedia)
        window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => apply());
    apply();
}
