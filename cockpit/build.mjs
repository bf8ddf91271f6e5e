// Bundle the page with esbuild, as cockpit-project/starter-kit does: src/index.jsx (React, PatternFly) and
// its CSS into dist/index.js.gz and dist/index.css.gz, index.html and manifest.json beside them, and each
// ../po/LANG.po as dist/po.LANG.js.gz. cockpit.js is not bundled: the page loads Cockpit's own
// (../base1/cockpit.js) from the cockpit-ws that serves it. Fonts are Cockpit's too (../../static/fonts/).
// Runs offline once `npm ci` has installed the lock file's packages.
import * as esbuild from "esbuild";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { poToJs } from "./po2js.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
const dist = path.join(here, "dist");
const production = process.env.NODE_ENV !== "development";

// PatternFly's fonts come from the Cockpit that serves the page, as Cockpit's own pages load them.
const cockpitFonts = {
    name: "cockpit-fonts",
    setup(build) {
        build.onResolve({ filter: /\.(woff2?|ttf|eot)$/ }, args => ({
            path: "../../static/fonts/" + path.basename(args.path), external: true,
        }));
    },
};

fs.rmSync(dist, { recursive: true, force: true });
fs.mkdirSync(dist);
await esbuild.build({
    entryPoints: { index: path.join(here, "src", "index.jsx") },
    bundle: true,
    outdir: dist,
    target: ["es2020"],
    minify: production && !process.env.NO_MINIFY, // NO_MINIFY=1: readable names for a profile
    legalComments: "external",
    loader: { ".js": "jsx", ".svg": "dataurl", ".png": "dataurl", ".jpg": "dataurl" },
    define: { "process.env.NODE_ENV": JSON.stringify(production ? "production" : "development") },
    plugins: [cockpitFonts],
    logLevel: "warning",
});
for (const f of fs.readdirSync(dist).filter(f => f.endsWith(".LEGAL.txt")))
    if (!fs.statSync(path.join(dist, f)).size)
        fs.rmSync(path.join(dist, f)); // no third-party notice in it
for (const f of ["index.html", "manifest.json"])
    fs.copyFileSync(path.join(here, f), path.join(dist, f));
const po = path.join(here, "..", "po");
for (const f of fs.readdirSync(po).filter(f => f.endsWith(".po")).sort()) {
    const lang = f.slice(0, -3);
    fs.writeFileSync(path.join(dist, `po.${lang}.js`), poToJs(fs.readFileSync(path.join(po, f), "utf8"), lang));
}
// Compressed as Cockpit's own packages are: the bridge serves FILE.gz for FILE (gzip transfer encoding), so
// only the .gz is installed. Deterministic: no name or time in the gzip header.
for (const f of fs.readdirSync(dist).filter(f => /\.(js|css)$/.test(f))) {
    const file = path.join(dist, f);
    fs.writeFileSync(file + ".gz", zlib.gzipSync(fs.readFileSync(file), { level: 9 }));
    fs.rmSync(file);
}
console.log("built", fs.readdirSync(dist).sort().join(" "));
