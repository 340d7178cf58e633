// Draws a consumer group's lag over time with uPlot, refreshing every 5 s.
(function () {
  var el = document.getElementById("lag-chart");
  if (!el || !window.uPlot) { return; }
  var plot = null;
  // y tick labels with thousands separators (12,500)
  function separated(u, vals) { return vals.map(function (v) { return v == null ? "" : v.toLocaleString("en-US"); }); }
  // the y axis as wide as its widest tick label (+ tick and gap), so the title never overlaps them
  function fitTicks(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1 && axis._size) { return axis._size; }
    var widest = 0;
    u.ctx.font = axis.font[0];
    (values || []).forEach(function (v) { widest = Math.max(widest, u.ctx.measureText(String(v)).width); });
    return Math.ceil(widest / (window.devicePixelRatio || 1) + axis.ticks.size + axis.gap + 4);
  }
  function draw(data) {
    var series = [data.t, data.lag];
    if (plot === null) {
      plot = new uPlot({
        width: Math.min(840, el.clientWidth || 840), height: 240,
        series: [{}, { label: "lag (messages)", stroke: "#1a5fb4", width: 2, fill: "rgba(26,95,180,0.08)" }],
        axes: [{}, { label: "messages", labelSize: 22, size: fitTicks, values: separated }],
        scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.15)]; } } }
      }, series, el);
      el._uplot = plot;
      el.setAttribute("data-points", String(data.t.length));
    } else {
      plot.setData(series);
      el.setAttribute("data-points", String(data.t.length));
    }
  }
  function load() {
    fetch(el.getAttribute("data-src")).then(function (r) { return r.json(); }).then(draw).catch(function () {});
  }
  load();
  setInterval(load, 5000);
})();
