// Boots Google's Model Explorer (the web app packaged in ai-edge-model-explorer) inside this
// Streamlit component frame, fed from the component's arguments instead of Model Explorer's server.
//
// Why this way: Streamlit serves both this folder and Model Explorer's packaged web app on the
// dashboard's own port (declare_component paths), so the viewer works wherever the dashboard does,
// an SSH tunnel included, and the graph travels over the session's own websocket: no extra server,
// no port, no file and no URL holds the model. Model Explorer asks its server for everything under
// /api/v1/ (extensions, the graph JSON, the overlays); those requests are answered here from the
// arguments, and nothing else under /api is fetched. Its one outside request (a web font) is dropped.
//
// Arguments: {app: name of the component serving Model Explorer's web app, graph: graph collection
// JSON, overlays: {name: node data JSON}, height: frame height}. Value sent back: the id of the node
// the user picked in the graph.
(() => {
  "use strict";
  const host = window.parent;  // Streamlit; Model Explorer's own window.parent is replaced below
  const send = (type, data) => host.postMessage(Object.assign({isStreamlitMessage: true, type}, data), "*");
  const json = (body) => new Response(typeof body === "string" ? body : JSON.stringify(body),
                                      {status: 200, headers: {"Content-Type": "application/json"}});
  const GRAPH_FILE = "graph.json";
  let booted = false;

  function serve(files, url) {
    const path = url.pathname;
    if (path.endsWith("/api/v1/get_extensions")) {
      return json([{type: "adapter", id: "builtin_json", name: "JSON adapter", description: "", fileExts: ["json"]}]);
    }
    if (path.endsWith("/api/v1/read_text_file")) {
      const name = url.searchParams.get("path");
      return Object.prototype.hasOwnProperty.call(files, name) ? json({content: files[name]})
                                                                : json({error: "not available"});
    }
    if (path.endsWith("/api/v1/check_new_version")) {
      return json({version: "", runningVersion: "", releaseUrl: "", desktopAppUrl: ""});
    }
    if (path.endsWith("/api/v1/notify_user_provided_model_path")) return json({status: "ok"});
    return new Response("", {status: 404});
  }

  function intercept(files) {
    const realFetch = window.fetch.bind(window);
    window.fetch = (input, init) => {
      const url = new URL(typeof input === "string" ? input : input.url, document.baseURI);
      if (url.origin === location.origin && /\/api(post|stream)?\/v1\//.test(url.pathname)) {
        return Promise.resolve(serve(files, url));
      }
      return realFetch(input, init);
    };
    window.EventSource = class { addEventListener() {} close() {} };  // no server to push reloads
    // Model Explorer tells its parent which node was picked; that message comes here instead.
    Object.defineProperty(window, "parent", {configurable: true, value: {postMessage(message) {
      if (message && message.cmd === "model-explorer-node-selected" && typeof message.nodeId === "string") {
        send("streamlit:setComponentValue", {value: message.nodeId, dataType: "json"});
      }
    }}});
  }

  // Model Explorer's CSS names its fonts by absolute path and its page loads a web font from the
  // internet: point the first at the packaged files, drop the second.
  function localCss(css, base) {
    return css.replace(/@font-face\{[^}]*https?:\/\/[^}]*\}/g, "")
              .replace(/url\(\/static_files\//g, `url(${base}static_files/`);
  }

  // Model Explorer picks the overlay it shows by a race: the one added last if the graph is already
  // in its pane, else the first one loaded. Until the user picks one, make it the first one Python
  // lists, through the same visibility toggle a user clicks.
  function showFirstOverlay(names) {
    let userChose = false;
    document.addEventListener("click", (event) => {
      if (event.isTrusted && event.target.closest && event.target.closest(".index-row")) userChose = true;
    }, true);
    const observer = new MutationObserver(() => {
      if (userChose) { observer.disconnect(); return; }
      const rows = [...document.querySelectorAll(".index-row")].filter((row) => row.querySelector(".run-name"));
      const toggles = rows.map((row) => row.querySelector(".icon-container.visibility"));
      if (rows.length < names.length || toggles.some((toggle) => !toggle || toggle.classList.contains("hide"))) return;
      const wanted = rows.find((row) => row.querySelector(".run-name").textContent.trim() === names[0]);
      const toggle = wanted && wanted.querySelector(".icon-container.visibility");
      if (toggle && !toggle.classList.contains("selected")) toggle.click();
    });
    observer.observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ["class"]});
  }

  // Streamlit draws every tab at once and hides all but the open one, so this frame may start with
  // no size. Model Explorer fits the graph to its pane once, when the graph loads: fitted to a pane
  // of no size, its zoom is NaN and nothing is ever drawn. So it starts once the frame has a size.
  function sized() {
    const ready = () => window.innerWidth > 0 && window.innerHeight > 0;
    if (ready()) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => { if (ready()) { window.removeEventListener("resize", check); resolve(); } };
      window.addEventListener("resize", check);
    });
  }

  async function boot(args) {
    await sized();
    const base = new URL(`../${encodeURIComponent(args.app)}/`, location.href);
    const page = new DOMParser().parseFromString(await (await fetch(new URL("index.html", base))).text(), "text/html");
    const files = Object.assign({[GRAPH_FILE]: args.graph}, args.overlays);
    // Listed last, the first overlay is usually the one Model Explorer shows; showFirstOverlay makes sure.
    const data = {models: [{url: GRAPH_FILE, adapterId: "builtin_json"}], nodeData: Object.keys(args.overlays).reverse()};
    history.replaceState(null, "", `${base.pathname}?data=${encodeURIComponent(JSON.stringify(data))}`);
    intercept(files);
    const baseTag = document.createElement("base");
    baseTag.href = base.pathname;
    document.head.prepend(baseTag);
    for (const style of page.head.querySelectorAll("style")) {
      document.head.append(Object.assign(document.createElement("style"), {textContent: localCss(style.textContent, base.pathname)}));
    }
    for (const link of page.head.querySelectorAll('link[rel="stylesheet"]')) {
      const css = await (await fetch(new URL(link.getAttribute("href"), base))).text();
      document.head.append(Object.assign(document.createElement("style"), {textContent: localCss(css, base.pathname)}));
    }
    document.getElementById("qnn-lab-status").remove();
    if (Object.keys(args.overlays).length) showFirstOverlay(Object.keys(args.overlays));
    document.body.append(document.createElement("app-root"));
    for (const script of page.body.querySelectorAll("script[src]")) {
      const element = document.createElement("script");
      element.type = script.type || "text/javascript";
      element.src = new URL(script.getAttribute("src"), base).href;
      document.body.append(element);
    }
  }

  window.addEventListener("message", (event) => {
    if (event.source !== host || !event.data || event.data.type !== "streamlit:render") return;
    const args = event.data.args;
    send("streamlit:setFrameHeight", {height: args.height});
    if (booted) return;  // a new graph or new overlays come with a new component key: a fresh frame
    booted = true;
    boot(args).catch((error) => {
      const status = document.getElementById("qnn-lab-status");
      if (status) status.textContent = `The graph viewer could not start: ${error}`;
    });
  });
  send("streamlit:componentReady", {apiVersion: 1});
})();
