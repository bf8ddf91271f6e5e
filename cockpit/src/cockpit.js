/* Cockpit's cockpit.js, loaded by index.html from the cockpit-ws that serves the page
 * (../base1/cockpit.js), never bundled. */
export default window.cockpit;
