// The domain graph: cytoscape, laid out as a hierarchy (organisations, then projects and
// oracles, then a project's stoves as groups by state, then stoves, their claims and the
// credentials those earned). The server sends a project's stoves as groups with a count
// (graph.json); a click on a group adds its stoves, a page at a time (graph/members.json),
// and a click on "more" the next page. A click on a domain opens its twin. A plain list
// beside it does the same for keyboard and screen-reader users.
const box = document.getElementById("graph");
const list = document.getElementById("graph-list");
const TYPES = ["organisation", "project", "device", "asset", "oracle", "claim", "credential"];
const NOT_TWINS = ["claim", "credential", "group", "more"]; // nodes without a twin page
const STATE_WORDS = { verified: "verified", unverified: "not verified", deactivated: "deactivated" };
const GAP_X = 110;
// Nodes per row before a level wraps onto another row: fewer on a phone.
const WRAP = () => Math.min(Math.max(Math.floor(box.clientWidth / 70), 4), 12);
const GAP_Y = 110;

function kind(type) {
  const t = (type || "").toLowerCase();
  if (t === "organization") return "organisation";
  return TYPES.includes(t) ? (t === "asset" ? "device" : t) : "other";
}

function twinUrl(did) {
  return "/console/twins/" + did;
}

function groupId(group) {
  return `group:${group.project}:${group.state}`;
}

function groupLabel(group) {
  return `${group.count} ${STATE_WORDS[group.state] || group.state} stove${group.count === 1 ? "" : "s"}`;
}

function nodeData(n) {
  return {
    id: n.did,
    label: n.name || n.did.split("/").pop(),
    kind: kind(n.type),
    state: n.state || "",
    did: n.did,
    type: n.type,
  };
}

// The level (row) of each node: a fixed rank by kind, stoves below their groups, claims
// below stoves and credentials below claims.
function levelOf(node, groups) {
  const k = node.data("kind");
  if (k === "organisation") return 0;
  if (k === "project" || k === "oracle" || k === "other") return 1;
  if (k === "group") return 2;
  const stove = groups ? 3 : 2;
  if (k === "more") return stove;
  if (k === "device") return stove;
  if (k === "claim") return stove + 1;
  if (k === "credential") return stove + 2;
  return 1;
}

// Rows ordered by where each node's parent stands, wrapped at WRAP nodes.
function layered(cy) {
  const groups = cy.nodes("[kind = 'group']").length > 0;
  const levels = new Map();
  cy.nodes().forEach((n) => {
    const level = levelOf(n, groups);
    if (!levels.has(level)) levels.set(level, []);
    levels.get(level).push(n);
  });
  const x = new Map();
  let top = 0;
  const wrap = WRAP();
  for (const level of [...levels.keys()].sort((a, b) => a - b)) {
    const row = levels.get(level);
    const anchor = (n) => {
      const parents = n.neighborhood("node").filter((m) => x.has(m.id()));
      if (!parents.length) return 0;
      return parents.map((m) => x.get(m.id())).reduce((a, b) => a + b, 0) / parents.length;
    };
    row.sort((a, b) => anchor(a) - anchor(b) || a.id().localeCompare(b.id()));
    for (let start = 0; start < row.length; start += wrap) {
      const part = row.slice(start, start + wrap);
      const gap = part.some((n) => n.data("kind") === "group") ? GAP_X * 1.3 : GAP_X;
      part.forEach((n, i) => {
        const px = (i - (part.length - 1) / 2) * gap;
        x.set(n.id(), px);
        n.position({ x: px, y: top });
      });
      top += start + wrap < row.length ? GAP_Y * 0.7 : GAP_Y;
    }
  }
}

function addGraph(cy, data, parent) {
  const known = (id) => cy.getElementById(id).length > 0;
  const added = [];
  for (const n of data.nodes) {
    if (!known(n.did)) added.push(cy.add({ group: "nodes", data: { ...nodeData(n), root: n.did === data.root ? 1 : 0, parent_: parent || "" } }));
  }
  for (const e of data.edges) {
    const id = `e:${e.source}:${e.type}:${e.target}`;
    if (!known(id) && known(e.source) && known(e.target)) added.push(cy.add({ group: "edges", data: { id, source: e.source, target: e.target, label: e.type } }));
  }
  for (const g of data.groups || []) {
    const id = groupId(g);
    if (known(id)) continue;
    added.push(cy.add({ group: "nodes", data: { id, label: groupLabel(g), kind: "group", state: g.state, project: g.project, count: g.count, size: Math.min(30 + 6 * Math.log2(g.count + 1), 70) } }));
    added.push(cy.add({ group: "edges", data: { id: `e:${id}`, source: g.project, target: id, label: "stoves" } }));
  }
  return added;
}

async function fetchJson(url) {
  const answer = await fetch(url, { credentials: "same-origin" });
  if (!answer.ok) throw new Error(`${answer.status}`);
  return answer.json();
}

class Graph {
  constructor(data) {
    this.status = document.getElementById("graph-status");
    this.cy = cytoscape({
      container: box,
      elements: [],
      wheelSensitivity: 0.3,
      style: STYLE,
    });
    addGraph(this.cy, data);
    this.root = data.root;
    this.relayout();
    this.cy.on("tap", "node", (event) => this.tap(event.target));
    window.twinhubGraph = this.cy; // for the browser tests and curious operators
  }

  relayout() {
    layered(this.cy);
    this.cy.fit(undefined, 30);
    if (this.cy.zoom() > 1.6) this.cy.zoom({ level: 1.6, renderedPosition: { x: box.clientWidth / 2, y: box.clientHeight / 2 } });
    this.cy.center();
    this.describe();
  }

  async tap(node) {
    const k = node.data("kind");
    if (k === "group") return this.toggle(node);
    if (k === "more") return this.more(node);
    if (!NOT_TWINS.includes(k)) window.location.assign(twinUrl(node.id()));
  }

  // Open a group (its first page of stoves) or close it again.
  async toggle(group) {
    if (group.data("open")) {
      const members = this.cy.nodes().filter((n) => n.data("parent_") === group.id());
      const below = members.union(members.successors("node")).filter((n) => n.data("kind") !== "group");
      below.remove();
      group.data("open", 0);
      this.relayout();
      return;
    }
    group.data("open", 1);
    await this.page(group, null);
  }

  async more(node) {
    const group = this.cy.getElementById(node.data("group"));
    const cursor = node.data("cursor");
    node.remove();
    await this.page(group, cursor);
  }

  async page(group, cursor) {
    const params = new URLSearchParams({ project: group.data("project"), state: group.data("state") });
    if (cursor) params.set("cursor", cursor);
    this.say(`Loading ${group.data("label")}…`);
    let data;
    try {
      data = await fetchJson(`/console/graph/members.json?${params}`);
    } catch {
      this.say(`The stoves of ${group.data("label")} could not be loaded.`);
      return;
    }
    addGraph(this.cy, { nodes: data.nodes, edges: [] }, group.id());
    for (const item of data.items) {
      this.cy.add({ group: "edges", data: { id: `e:${group.id()}:${item.did}`, source: group.id(), target: item.did } });
    }
    addGraph(this.cy, { nodes: [], edges: data.edges }, group.id());
    if (data.next) {
      const shown = this.cy.nodes().filter((n) => n.data("parent_") === group.id() && n.data("kind") === "device").length;
      const id = `more:${group.id()}`;
      this.cy.add({ group: "nodes", data: { id, label: `${data.total - shown} more…`, kind: "more", group: group.id(), cursor: data.next, parent_: group.id() } });
      this.cy.add({ group: "edges", data: { id: `e:${id}`, source: group.id(), target: id } });
    }
    this.relayout();
    this.say(`${group.data("label")}: ${Math.min(data.total, this.cy.nodes().filter((n) => n.data("parent_") === group.id() && n.data("kind") === "device").length)} of ${data.total} shown.`);
  }

  say(text) {
    if (this.status) this.status.textContent = text;
  }

  // The plain list (links to twins; groups and "more" as buttons) and the counts the
  // browser tests read.
  describe() {
    list.replaceChildren();
    const nodes = this.cy.nodes().sort((a, b) => levelOf(a, true) - levelOf(b, true));
    nodes.forEach((node) => {
      const k = node.data("kind");
      if (k === "claim" || k === "credential") return;
      const item = document.createElement("li");
      if (k === "group" || k === "more") {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "linkish";
        button.textContent = k === "more" ? `Show ${node.data("label")}` : `${node.data("open") ? "Hide" : "Show"} the ${node.data("label")}`;
        button.addEventListener("click", () => this.tap(node));
        item.append(button);
      } else {
        const link = document.createElement("a");
        link.href = twinUrl(node.id());
        link.textContent = node.data("label") + (node.data("label") === node.id() ? "" : " — " + node.id());
        item.append(link, " ", Object.assign(document.createElement("span"), { className: "muted", textContent: node.data("type") }));
      }
      list.append(item);
    });
    box.dataset.nodes = String(this.cy.nodes().length);
    box.dataset.claims = String(this.cy.nodes("[kind = 'claim']").length);
    box.dataset.groups = String(this.cy.nodes("[kind = 'group']").length);
    box.dataset.stoves = String(this.cy.nodes("[kind = 'device']").length);
  }
}

const STYLE = [
  { selector: "node", style: { label: "data(label)", "font-size": 11, "text-valign": "bottom", "text-margin-y": 4, width: 22, height: 22, "background-color": "#64748b", color: "#0f172a", "text-wrap": "ellipsis", "text-max-width": 110, "text-background-color": "#fdfdfd", "text-background-opacity": 0.85, "text-background-padding": 1 } },
  { selector: "node[kind = 'organisation']", style: { "background-color": "#4338ca", shape: "round-rectangle", width: 30, height: 30, "text-max-width": 180 } },
  { selector: "node[kind = 'project']", style: { "background-color": "#0f766e", shape: "round-rectangle", width: 30, height: 30, "text-max-width": 180 } },
  { selector: "node[kind = 'device']", style: { "background-color": "#b45309", width: 16, height: 16 } },
  { selector: "node[kind = 'group']", style: { shape: "ellipse", width: "data(size)", height: "data(size)", "background-color": "#b45309", "border-width": 3, "border-color": "#fff", "font-size": 12, "font-weight": 600, "text-wrap": "wrap", "text-max-width": 110 } },
  { selector: "node[kind = 'group'][open = 1]", style: { "border-color": "#0f172a" } },
  { selector: "node[kind = 'device'][state = 'verified'], node[kind = 'group'][state = 'verified']", style: { "background-color": "#15803d" } },
  { selector: "node[kind = 'device'][state = 'unverified'], node[kind = 'group'][state = 'unverified']", style: { "background-color": "#d97706" } },
  { selector: "node[kind = 'device'][state = 'deactivated'], node[kind = 'group'][state = 'deactivated']", style: { "background-color": "#94a3b8" } },
  { selector: "node[kind = 'more']", style: { shape: "round-rectangle", width: 18, height: 18, "background-color": "#e2e8f0", "border-width": 1, "border-color": "#64748b", "font-size": 11, color: "#0f766e" } },
  { selector: "node[kind = 'oracle']", style: { "background-color": "#be123c", shape: "diamond" } },
  { selector: "node[kind = 'claim']", style: { "background-color": "#0369a1", shape: "round-triangle", width: 14, height: 14, "font-size": 9 } },
  { selector: "node[kind = 'credential']", style: { "background-color": "#6d28d9", shape: "star", width: 16, height: 16, "font-size": 9 } },
  { selector: "node[root = 1]", style: { "border-width": 3, "border-color": "#0f172a" } },
  { selector: "edge", style: { width: 1.2, "line-color": "#cbd5e1", "target-arrow-color": "#cbd5e1", "target-arrow-shape": "triangle", "curve-style": "straight" } },
  { selector: "edge[label]", style: { label: "data(label)", "font-size": 8, color: "#94a3b8", "text-rotation": "autorotate" } },
];

async function load() {
  let data;
  try {
    data = await fetchJson(box.dataset.source);
  } catch {
    box.textContent = "The graph could not be loaded.";
    return;
  }
  const graph = new Graph(data);
  document.getElementById("zoom-in").addEventListener("click", () => graph.cy.zoom({ level: graph.cy.zoom() * 1.25, renderedPosition: { x: box.clientWidth / 2, y: box.clientHeight / 2 } }));
  document.getElementById("zoom-out").addEventListener("click", () => graph.cy.zoom({ level: graph.cy.zoom() / 1.25, renderedPosition: { x: box.clientWidth / 2, y: box.clientHeight / 2 } }));
  document.getElementById("zoom-fit").addEventListener("click", () => graph.cy.fit(undefined, 30));
}

if (box) load();
