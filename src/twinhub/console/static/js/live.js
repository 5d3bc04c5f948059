// The twin's live chart: reads the server-sent events of GET /v1/domains/{did}/events (the
// session cookie authenticates it) and plots each reading as it arrives. Without a
// telemetry stream (404, or no such route yet) it says "No live data".
const box = document.getElementById("live-chart");
const status = document.getElementById("live-status");
const MAX_POINTS = 300;

function readingOf(data) {
  // ThingsBoard-style {"ts": ms, "values": {...}} or a flat {"ts"|"time": ..., name: number}.
  const values = data.values && typeof data.values === "object" ? data.values : data;
  const raw = data.ts ?? data.time ?? data.timestamp ?? Date.now();
  const seconds = typeof raw === "number" ? (raw > 1e12 ? raw / 1000 : raw) : Date.parse(raw) / 1000;
  const numbers = Object.entries(values).filter(([k, v]) => typeof v === "number" && !["ts", "time", "timestamp"].includes(k));
  return { seconds, numbers };
}

function noLiveData(text) {
  status.textContent = text;
  box.hidden = true;
  box.dataset.state = "none";
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
  const names = [];
  const columns = [[]];
  let plot = null;
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
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (!data) continue;
      let reading;
      try {
        reading = readingOf(JSON.parse(data));
      } catch {
        continue;
      }
      for (const [name] of reading.numbers) {
        if (!names.includes(name)) {
          names.push(name);
          columns.push(columns[0].map(() => null));
          plot?.destroy();
          plot = null;
        }
      }
      columns[0].push(reading.seconds);
      names.forEach((name, i) => {
        const found = reading.numbers.find(([n]) => n === name);
        columns[i + 1].push(found ? found[1] : null);
      });
      if (columns[0].length > MAX_POINTS) columns.forEach((c) => c.shift());
      if (!plot) {
        plot = new uPlot({ width: Math.max(box.clientWidth, 280), height: 220, series: [{}, ...names.map((n, i) => ({ label: n, stroke: ["#0f766e", "#b45309", "#4338ca"][i % 3], width: 2 }))] }, columns, box);
      } else {
        plot.setData(columns);
      }
      box.dataset.readings = String(columns[0].length);
      status.textContent = `Last reading ${new Date(reading.seconds * 1000).toISOString().slice(0, 19).replace("T", " ")} UTC`;
    }
  }
  status.textContent = "The event stream closed.";
}

if (box) follow();
