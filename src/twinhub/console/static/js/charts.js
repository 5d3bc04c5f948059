// Draws every [data-chart] element with uPlot: {title, dates: [YYYY-MM-DD], series: {name: [n]}}.
const COLOURS = ["#0f766e", "#b45309", "#4338ca", "#be123c"];

export function drawChart(element, chart) {
  const names = Object.keys(chart.series);
  const xs = chart.dates.map((d) => Date.parse(d + "T00:00:00Z") / 1000);
  const width = Math.max(element.clientWidth, 280);
  const options = {
    width,
    height: 220,
    series: [{}, ...names.map((name, i) => ({ label: name, stroke: COLOURS[i % COLOURS.length], width: 2 }))],
    axes: [{}, { size: 48 }],
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
