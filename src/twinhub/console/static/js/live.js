// The twin's live chart: reads the server-sent events of GET /v1/domains/{did}/events (the
// session cookie authenticates it) and plots each reading as it arrives. The stream (see
// registry/routes_telemetry.py) sends
//   event: state     {"did", "lastSeen", "online", "latest": {name: {value, time, seq}}, ...}
//                    first, then {"device", "online"} whenever the twin comes or goes;
//   event: readings  {"device", "count", "latest": {"seq", "time", name: value, ...}}
//                    for each stored batch (its newest reading).
// Without a stream (an error answer) it says "No live data".
const box = document.getElementById("live-chart");
const status = document.getElementById("live-status");
const MAX_POINTS = 300;
const COLOURS = ["#0f766e", "#b45309", "#4338ca", "#be123c", "#15803d", "#6d28d9"];
// Each field's unit, from the twin's protocol: each unit gets a scale of its own, so a
// temperature in °C does not flatten an energy in kWh (the first two units get an axis).
const UNITS = (() => {
  try {
    return JSON.parse(box.dataset.units || "{}");
  } catch {
    return {};
  }
})();

function seconds(time) {
  const parsed = Date.parse(time);
  return Number.isFinite(parsed) ? parsed / 1000 : Date.now() / 1000;
}

function numbers(values) {
  return Object.entries(values).filter(([, v]) => typeof v === "number" && Number.isFinite(v));
}

// A point from an event, or null: a batch's newest reading, or the twin's last known values.
function pointOf(kind, data) {
  if (kind === "readings" && data.latest && typeof data.latest === "object") {
    const { seq, time, ...values } = data.latest;
    return { seconds: seconds(time), seq, values: numbers(values) };
  }
  if (kind === "state" && data.latest && data.lastSeen) {
    const values = Object.entries(data.latest).map(([name, cell]) => [name, cell && cell.value]);
    return { seconds: seconds(data.lastSeen), seq: data.lastSeq, values: numbers(Object.fromEntries(values)) };
  }
  return null;
}

function noLiveData(text) {
  status.textContent = text;
  box.hidden = true;
  box.dataset.state = "none";
}

function utc(secondsValue) {
  return `${new Date(secondsValue * 1000).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

class Chart {
  constructor() {
    this.names = [];
    this.points = [];
    this.plot = null;
  }

  add(point) {
    for (const [name] of point.values) {
      if (!this.names.includes(name)) {
        this.names.push(name);
        this.plot?.destroy();
        this.plot = null;
      }
    }
    // Keep time order: a late batch may be older than what is shown.
    let at = this.points.length;
    while (at > 0 && this.points[at - 1].seconds > point.seconds) at -= 1;
    this.points.splice(at, 0, point);
    if (this.points.length > MAX_POINTS) this.points.shift();
    const columns = [this.points.map((p) => p.seconds)];
    for (const name of this.names) {
      columns.push(this.points.map((p) => p.values.find(([n]) => n === name)?.[1] ?? null));
    }
    if (!this.plot) {
      const unitOf = (n) => UNITS[n] || n;
      const units = [...new Set(this.names.map(unitOf))];
      const series = this.names.map((n, i) => ({
        label: UNITS[n] ? `${n} (${UNITS[n]})` : n,
        scale: unitOf(n),
        stroke: COLOURS[i % COLOURS.length],
        width: 2,
        spanGaps: true,
      }));
      const axes = [{}, ...units.slice(0, 2).map((unit, i) => ({ scale: unit, side: i === 0 ? 3 : 1, label: unit, grid: { show: i === 0 } }))];
      // One reading (or several at one instant) gives the time axis no width of its own:
      // show the half hour either side of it rather than a range uPlot invents. The span
      // drawn is kept on the box, as the last seq is (the axis itself is canvas).
      const timeRange = (u, min, max) => {
        // From the data itself: for one instant uPlot passes a span of its own already.
        const xs = (u.data && u.data[0]) || [];
        const first = xs.length ? xs[0] : min;
        const last = xs.length ? xs[xs.length - 1] : max;
        const span = first === last ? [first - 1800, last + 1800] : [first, last];
        box.dataset.timeRange = span.join(",");
        return span;
      };
      const x = { time: true, range: timeRange };
      this.plot = new uPlot({ width: Math.max(box.clientWidth, 280), height: 220, scales: { x }, series: [{}, ...series], axes }, columns, box);
    } else {
      this.plot.setData(columns);
    }
  }
}

async function follow() {
  let answer;
  try {
    answer = await fetch(box.dataset.events, { headers: { Accept: "text/event-stream" }, credentials: "same-origin" });
  } catch {
    return noLiveData("No live data: the event stream is unreachable.");
  }
  if (!answer.ok || !(answer.headers.get("content-type") || "").startsWith("text/event-stream")) {
    return noLiveData("No live data for this twin.");
  }
  status.textContent = "Waiting for readings…";
  box.dataset.state = "live";
  const chart = new Chart();
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
      const point = pointOf(kind, data);
      if (point && point.values.length) chart.add(point);
      if (kind === "readings") {
        arrived += 1;
        box.dataset.readings = String(arrived);
        box.dataset.lastSeq = String(point?.seq ?? "");
        detail = `reading ${point?.seq ?? ""} arrived (${utc(point?.seconds ?? Date.now() / 1000)})`;
      } else if (kind === "state" && data.did) {
        detail = data.lastSeen ? `last reading ${utc(seconds(data.lastSeen))}; waiting for readings…` : "no reading yet; waiting for readings…";
      }
      if (kind === "readings" || kind === "state") {
        status.textContent = `${online === false ? "Offline" : online ? "Online" : "Live"} · ${detail}`;
      }
    }
  }
  status.textContent = "The event stream closed.";
}

if (box) follow();
