// Draws every [data-chart] element with uPlot:
// {title, dates: [YYYY-MM-DD], series: {name: [n]}, units: {name: unit}}.
// Each unit gets a scale and an axis of its own (sessions on the left, kWh on the right), so
// one quantity is never flattened by another's size; an axis is as wide as its labels.
const COLOURS = ["#0f766e", "#b45309", "#4338ca", "#be123c"];

function axisWidth(self, values) {
  const longest = Math.max(0, ...(values || []).map((v) => String(v).length));
  return Math.max(40, 14 + longest * 8);
}

export function drawChart(element, chart) {
  const names = Object.keys(chart.series);
  const units = chart.units || {};
  const scales = [...new Set(names.map((n) => units[n] || "y"))];
  const xs = chart.dates.map((d) => Date.parse(d + "T00:00:00Z") / 1000);
  const width = Math.max(element.clientWidth, 280);
  const options = {
    width,
    height: 220,
    series: [
      {},
      ...names.map((name, i) => ({
        label: units[name] && !name.includes(units[name]) ? `${name} (${units[name]})` : name,
        stroke: COLOURS[i % COLOURS.length],
        width: 2,
        scale: units[name] || "y",
      })),
    ],
    axes: [
      {},
      ...scales.map((scale, i) => ({
        scale,
        side: i === 0 ? 3 : 1,
        size: axisWidth,
        label: scale === "y" ? undefined : scale,
        grid: { show: i === 0 },
        stroke: scales.length > 1 ? COLOURS[names.findIndex((n) => (units[n] || "y") === scale) % COLOURS.length] : undefined,
      })),
    ],
    scales: { x: { time: true } },
  };
  const plot = new uPlot(options, [xs, ...names.map((n) => chart.series[n])], element);
  new ResizeObserver(() => plot.setSize({ width: Math.max(element.clientWidth, 280), height: 220 })).observe(element);
  return plot;
}

for (const element of document.querySelectorAll("[data-chart]")) {
  drawChart(element, JSON.parse(element.dataset.chart));
  element.dataset.drawn = "true";
}
