/* The page's entry: Cockpit's translations and theme, then the React app (app.jsx). */
import cockpit from "./cockpit.js";
import React from "react";
import { createRoot } from "react-dom/client";

import "@patternfly/react-core/dist/styles/base.css";
import "./page.css";

import { App } from "./app.jsx";
import { followCockpitStyle } from "./dark-theme.js";

followCockpitStyle();

document.addEventListener("DOMContentLoaded", () => {
    document.documentElement.lang = cockpit.language || "en";
    cockpit.translate(); // <title translate> and any other marked element of index.html
    createRoot(document.getElementById("app")).render(<App />);
});
