// The domain graph: cytoscape with zoom, pan and click-to-open; a plain list beside it for
// keyboard and screen-reader users.
const box = document.getElementById("graph");
const TYPES = ["organisation", "project", "device", "asset", "oracle", "claim", "credential"];
const NOT_TWINS = ["claim", "credential"]; // nodes without a twin page

function kind(type) {
  const t = (type || "").toLowerCase();
  if (t === "organization") return "organisation";
  return TYPES.includes(t) ? (t === "asset" ? "device" : t) : "other";
}

function twinUrl(did) {
  return "/console/twins/" + did;
}

async function load() {
  const answer = await fetch(box.dataset.source, { credentials: "same-origin" });
  if (!answer.ok) {
    box.textContent = "The graph could not be loaded.";
    return;
  }
  const data = await answer.json();
  const elements = [
    ...data.nodes.map((n) => ({
      data: { id: n.did, label: n.name || n.did.split("/").pop(), kind: kind(n.type), root: n.did === data.root ? 1 : 0 },
    })),
    ...data.edges.map((e, i) => ({ data: { id: "e" + i, source: e.source, target: e.target, label: e.type } })),
  ];
  const cy = cytoscape({
    container: box,
    elements,
    wheelSensitivity: 0.3,
    layout: { name: "breadthfirst", directed: false, roots: [data.root], spacingFactor: 1.1, padding: 20 },
    style: [
      { selector: "node", style: { label: "data(label)", "font-size": 11, "text-valign": "bottom", "text-margin-y": 4, width: 22, height: 22, "background-color": "#64748b", color: "#0f172a", "text-wrap": "ellipsis", "text-max-width": 120 } },
      { selector: "node[kind = 'organisation']", style: { "background-color": "#4338ca", shape: "round-rectangle" } },
      { selector: "node[kind = 'project']", style: { "background-color": "#0f766e", shape: "round-rectangle", width: 28, height: 28 } },
      { selector: "node[kind = 'device']", style: { "background-color": "#b45309", width: 16, height: 16 } },
      { selector: "node[kind = 'oracle']", style: { "background-color": "#be123c", shape: "diamond" } },
      { selector: "node[kind = 'claim']", style: { "background-color": "#0369a1", shape: "round-triangle", width: 14, height: 14, "font-size": 9 } },
      { selector: "node[kind = 'credential']", style: { "background-color": "#15803d", shape: "star", width: 16, height: 16, "font-size": 9 } },
      { selector: "node[root = 1]", style: { "border-width": 3, "border-color": "#0f172a" } },
      { selector: "edge", style: { width: 1.5, "line-color": "#cbd5e1", "target-arrow-color": "#cbd5e1", "target-arrow-shape": "triangle", "curve-style": "bezier", label: "data(label)", "font-size": 8, color: "#64748b", "text-rotation": "autorotate" } },
    ],
  });
  cy.on("tap", "node", (event) => {
    if (!NOT_TWINS.includes(event.target.data("kind"))) window.location.assign(twinUrl(event.target.id()));
  });
  document.getElementById("zoom-in").addEventListener("click", () => cy.zoom({ level: cy.zoom() * 1.25, renderedPosition: { x: box.clientWidth / 2, y: box.clientHeight / 2 } }));
  document.getElementById("zoom-out").addEventListener("click", () => cy.zoom({ level: cy.zoom() / 1.25, renderedPosition: { x: box.clientWidth / 2, y: box.clientHeight / 2 } }));
  document.getElementById("zoom-fit").addEventListener("click", () => cy.fit(undefined, 20));
  const list = document.getElementById("graph-list");
  for (const node of data.nodes.filter((n) => !NOT_TWINS.includes(kind(n.type)))) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = twinUrl(node.did);
    link.textContent = (node.name ? node.name + " — " : "") + node.did;
    item.append(link, " ", Object.assign(document.createElement("span"), { className: "muted", textContent: node.type }));
    list.append(item);
  }
  box.dataset.nodes = String(data.nodes.length);
  box.dataset.claims = String(data.nodes.filter((n) => n.type === "Claim").length);
  window.twinhubGraph = cy; // for the browser tests and curious operators
}

if (box) load();
