// The twin's telemetry: its history from the rollups (the page carries it in
// data-history, console/twin_history.py), one uPlot chart per panel — the meter register,
// use (energy, sessions), condition (temperature, battery) — each unit on its own y axis.
// Then the server-sent events of GET /v1/domains/{did}/events (the session cookie
// authenticates it, see registry/routes_telemetry.py):
//   event: state     {"did", "lastSeen", "online", ...} first, then {"device", "online"};
//   event: readings  {"device", "count", "latest": {"seq", "time", ...}} per stored batch.
// Each batch updates the bucket it fell in, read again from the rollups
// (GET /v1/domains/{did}/telemetry/aggregates), so what is drawn is what was stored.
const box = document.getElementById("live-chart");
const status = document.getElementById("live-status");
const COLOURS = ["#0f766e", "#b45309", "#4338ca", "#be123c", "#15803d", "#6d28d9"];
const HOUR = 3600;

function utc(secondsValue) {
  return `${new Date(secondsValue * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

// The start of the hour, day or month (UTC) holding a moment, in seconds.
function bucketOf(seconds, interval) {
  const d = new Date(seconds * 1000);
  if (interval === "hour") return Math.floor(seconds / HOUR) * HOUR;
  if (interval === "day") return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) / 1000;
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) / 1000;
}

function valueOf(cell, how) {
  if (!cell || !cell.count) return null;
  if (how === "last") return cell.max;
  if (how === "sum") return cell.sum;
  if (how === "count") return cell.count;
  return cell.sum / cell.count;
}

class Panel {
  constructor(spec, range) {
    this.spec = spec;
    this.range = range;
    this.element = document.getElementById(`chart-${spec.id}`);
    this.x = [...spec.x];
    this.values = spec.values.map((v) => [...v]);
    this.plot = null;
    this.drawn = "";
    new ResizeObserver(() => this.plot?.setSize(this.size())).observe(this.element);
  }

  // How many buckets the range holds (points are drawn only where they do not crowd).
  buckets() {
    const seconds = { hour: HOUR, day: 24 * HOUR, month: 30 * 24 * HOUR }[this.spec.interval] || 24 * HOUR;
    return Math.max((this.range[1] - this.range[0]) / seconds, 1);
  }

  size() {
    return { width: Math.max(this.element.clientWidth, 240), height: 200 };
  }

  // A bucket's figures from its rollup cells (replacing what was drawn for it).
  put(start, fields) {
    let at = this.x.findIndex((t) => t >= start);
    if (at < 0) at = this.x.length;
    if (this.x[at] !== start) {
      this.x.splice(at, 0, start);
      this.values.forEach((column) => column.splice(at, 0, null));
    }
    this.spec.series.forEach((s, i) => {
      this.values[i][at] = valueOf(fields[s.cell], s.how);
    });
  }

  draw() {
    const active = this.spec.series.map((s, i) => [s, i]).filter(([, i]) => this.values[i].some((v) => v !== null));
    this.element.closest(".panel").hidden = active.length === 0;
    if (!active.length) return;
    const key = active.map(([s]) => s.key).join(",");
    const data = [this.x, ...active.map(([, i]) => this.values[i])];
    if (this.plot && key === this.drawn) {
      this.plot.setData(data);
      return;
    }
    this.plot?.destroy();
    this.drawn = key;
    const units = [...new Set(active.map(([s]) => s.unit))];
    const series = active.map(([s, i]) => ({
      label: s.label,
      scale: s.unit,
      stroke: COLOURS[i % COLOURS.length],
      width: 2,
      spanGaps: false,
      points: { show: this.size().width / this.buckets() >= 8 },
      value: (u, v) => (v == null ? "–" : Number(v.toFixed(Math.abs(v) >= 100 ? 1 : 3)).toString()),
    }));
    // Each unit its own y axis (left, right, then left again), labelled with its unit.
    const axes = [{}, ...units.map((unit, i) => ({ scale: unit, side: i % 2 ? 1 : 3, label: unit, grid: { show: i === 0 }, size: 52, labelSize: 18 }))];
    const scales = { x: { time: true, range: () => [this.range[0], Math.max(this.range[1], this.x[this.x.length - 1] || 0)] } };
    for (const unit of units) scales[unit] = { range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] };
    this.plot = new uPlot({ ...this.size(), scales, series: [{}, ...series], axes }, data, this.element);
    this.element.dataset.axes = String(units.length);
  }
}

class History {
  constructor(spec) {
    this.spec = spec;
    this.panels = spec.panels.map((p) => new Panel({ ...p, interval: spec.interval }, [spec.from, spec.to]));
    this.pending = null;
    this.panels.forEach((p) => p.draw());
    this.say();
    window.twinhubCharts = Object.fromEntries(this.panels.map((p) => [p.spec.id, p])); // for the browser tests
    box.dataset.drawn = String(this.panels.filter((p) => p.plot).length);
    // Buckets with readings (the range's others are gaps).
    box.dataset.buckets = String(Math.max(0, ...this.panels.map((p) => p.x.filter((_, i) => p.values.some((v) => v[i] !== null)).length)));
  }

  say() {
    document.getElementById("no-history").hidden = this.panels.some((p) => p.plot && !p.element.closest(".panel").hidden);
  }

  // Read the buckets from `since` on again from the rollups (a batch was stored).
  async refresh(since) {
    const url = `${box.dataset.events.replace(/\/events$/, "")}/telemetry/aggregates?` + new URLSearchParams({ interval: this.spec.interval, from: new Date(since * 1000).toISOString() });
    const answer = await fetch(url, { credentials: "same-origin" });
    if (!answer.ok) return;
    const { buckets } = await answer.json();
    for (const bucket of buckets) {
      const start = Date.parse(bucket.start) / 1000;
      this.panels.forEach((p) => p.put(start, bucket.fields));
    }
    this.panels.forEach((p) => p.draw());
    this.say();
    box.dataset.refreshed = String(Number(box.dataset.refreshed || 0) + 1);
  }
}

function noLiveData(text) {
  status.textContent = text;
  box.dataset.state = "none";
}

async function follow(history) {
  let answer;
  try {
    answer = await fetch(box.dataset.events, { headers: { Accept: "text/event-stream" }, credentials: "same-origin" });
  } catch {
    return noLiveData("History only: the live stream is unreachable.");
  }
  if (!answer.ok || !(answer.headers.get("content-type") || "").startsWith("text/event-stream")) {
    return noLiveData("History only: no live data for this twin.");
  }
  status.textContent = "Waiting for readings…";
  box.dataset.state = "live";
  let arrived = 0;
  let online = null;
  let detail = "waiting for readings…";
  const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message";
      const lines = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) lines.push(line.slice(5).trim());
      }
      if (!lines.length) continue; // a keep-alive comment
      let data;
      try {
        data = JSON.parse(lines.join("\n"));
      } catch {
        continue;
      }
      if (kind === "state" && typeof data.online === "boolean") {
        online = data.online;
        box.dataset.online = String(online);
      }
      if (kind === "readings" && data.latest && typeof data.latest === "object") {
        arrived += 1;
        const seconds = Date.parse(data.latest.time) / 1000 || Date.now() / 1000;
        box.dataset.readings = String(arrived);
        detail = `reading ${data.latest.seq ?? ""} arrived (${utc(seconds)})`;
        await history.refresh(bucketOf(Math.min(seconds, Date.now() / 1000), history.spec.interval));
        box.dataset.lastSeq = String(data.latest.seq ?? "");
      } else if (kind === "state" && data.did) {
        detail = data.lastSeen ? `last reading ${utc(Date.parse(data.lastSeen) / 1000)}; waiting for readings…` : "no reading yet; waiting for readings…";
      }
      if (kind === "readings" || kind === "state") {
        status.textContent = `${online === false ? "Offline" : online ? "Online" : "Live"} · ${detail}`;
      }
    }
  }
  status.textContent = "The live stream closed; the history stays as drawn.";
}

if (box) {
  const history = new History(JSON.parse(box.dataset.history));
  follow(history);
}
