// Draws a consumer group's lag over time with uPlot, refreshing every 5 s.
(function () {
  var el = document.getElementById("lag-chart");
  if (!el || !window.uPlot) { return; }
  var plot = null;
  function draw(data) {
    var series = [data.t, data.lag];
    if (plot === null) {
      plot = new uPlot({
        width: Math.min(840, el.clientWidth || 840), height: 240,
        series: [{}, { label: "lag (messages)", stroke: "#1a5fb4", width: 2, fill: "rgba(26,95,180,0.08)" }],
        axes: [{}, { label: "messages" }],
        scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.15)]; } } }
      }, series, el);
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
