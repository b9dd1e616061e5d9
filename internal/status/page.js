// The status page's refresh: every few seconds it fetches the model
// (/api/v1/status) and updates the figures, texts and charts in place.
// When the page's structure changes (a GPU, a workload, a plan appears or
// goes), it fetches the page again and swaps its body instead. Formats,
// scales and shapes follow internal/status (format.go, chart.go).
(function () {
  "use strict";
  var main = document.getElementById("status");
  var api = main && main.dataset.api;
  if (!api) return;
  var every = +main.dataset.refresh || 5000;
  var live = document.getElementById("live");

  function fix(x, d) {
    var p = Math.pow(10, d);
    return (Math.sign(x) * Math.round(Math.abs(x) * p) / p).toFixed(d);
  }
  function duration(s) {
    s = Math.round(s);
    if (s < 60) return s + "s";
    if (s < 3600) return s % 60 === 0 ? s / 60 + "m" : Math.floor(s / 60) + "m " + (s % 60) + "s";
    var m = Math.floor((s % 3600) / 60);
    return m === 0 ? Math.floor(s / 3600) + "h" : Math.floor(s / 3600) + "h " + m + "m";
  }
  var F = {
    bytes: function (v) { return fix(v / 1073741824, 1) + " GiB"; },
    percent: function (v) { return fix(v * 100, 0) + " %"; },
    watts: function (v) { return fix(v, 1) + " W"; },
    celsius: function (v) { return fix(v, 1) + " °C"; },
    mhz: function (v) { return fix(v / 1e6, 0) + " MHz"; },
    seconds: duration,
    int: function (v) { return String(v); },
    text: function (v) { return v; },
    list: function (v) { return v.length ? v.join(", ") : "none"; },
    okfail: function (v) { return v ? "ok" : "failing"; },
    cap: function (v) { return v ? F.percent(v.ratio) + (v.source === "default" ? " (default)" : "") : "none (uncapped)"; }
  };
  var missing = { bytes: "not read", cap: "none (uncapped)" };

  function get(m, path) {
    return path.split(".").reduce(function (o, k) { return o == null ? o : o[k]; }, m);
  }

  function shape(m) {
    var gs = m.gpus.map(function (g) {
      return "G" + g.index + (g.thermal ? "t" + (g.thermal.window.sm_clock_hertz ? "c" : "") : "");
    });
    var parts = [m.pool ? "P" : "-", gs.join(",")];
    parts.push(m.workloads ? "W" + m.workloads.list.map(function (w) {
      return w.pid + ":" + w.role + ":" + (w.cap ? "c" : "u");
    }).join(",") : "-");
    parts.push(m.plans ? "L" + m.plans.list.map(function (p) { return p.name; }).join(",") : "-");
    parts.push("C" + m.collectors.map(function (c) { return c.name; }).join(","));
    return parts.join("|");
  }

  function scale(kind, g) {
    var w = g.thermal.window;
    if (kind === "temperature") {
      return [Math.min(20, Math.floor(w.temperature_celsius.min / 10) * 10),
        Math.max(100, Math.ceil(w.temperature_celsius.max / 10) * 10)];
    }
    if (kind === "power") return [0, Math.ceil(Math.max(w.nominal_watts, w.power_watts.max) * 1.1 / 10) * 10];
    var top = w.sm_clock_hertz ? w.sm_clock_hertz.max : 0;
    if (g.sm_clock_max_hertz != null) top = Math.max(top, g.sm_clock_max_hertz);
    return [0, Math.max(100, Math.ceil(top / 1e8) * 100) * 1e6];
  }

  function desc(kind, g) {
    var w = g.thermal.window, span = duration(w.seconds), r;
    if (!w.samples.length) return "No sample in the last " + span + ".";
    if (kind === "temperature") {
      r = w.temperature_celsius;
      return "Temperature over the last " + span + ": " + F.celsius(r.min) + " to " + F.celsius(r.max) + ", now " + F.celsius(r.latest) + ".";
    }
    if (kind === "power") {
      r = w.power_watts;
      return "Power over the last " + span + ": " + F.watts(r.min) + " to " + F.watts(r.max) + ", now " + F.watts(r.latest) +
        "; the ~" + fix(w.plateau_watts, 0) + " W plateau and the " + fix(w.nominal_watts, 0) + " W rating are marked.";
    }
    r = w.sm_clock_hertz;
    if (!r) return "NVML reports no SM clock.";
    return "SM clock over the last " + span + ": " + F.mhz(r.min) + " to " + F.mhz(r.max) + ", now " + F.mhz(r.latest) + ".";
  }

  function num(x) { return String(Math.round(x * 10) / 10); }

  function chart(svg, m) {
    var kind = svg.dataset.chart, g = m.gpus[+svg.dataset.gpu], w = g.thermal.window;
    var s = scale(kind, g), lo = s[0], hi = s[1];
    var y = function (v) { return Math.max(0, Math.min(80, 80 - (v - lo) / (hi - lo) * 80)); };
    var pts = [];
    w.samples.forEach(function (p) {
      var v = kind === "temperature" ? p.temperature_celsius : kind === "power" ? p.power_watts : p.sm_clock_hertz;
      if (v == null) return;
      pts.push(num(300 * (1 - p.seconds_ago / w.seconds)) + "," + num(y(v)));
    });
    svg.querySelector("polyline").setAttribute("points", pts.join(" "));
    svg.querySelector("[data-desc]").textContent = desc(kind, g);
    var refs = svg.querySelectorAll("line.ref"), at = [w.plateau_watts, w.nominal_watts];
    for (var i = 0; i < refs.length; i++) {
      refs[i].setAttribute("y1", num(y(at[i])));
      refs[i].setAttribute("y2", num(y(at[i])));
    }
    var f = kind === "temperature" ? F.celsius : kind === "power" ? F.watts : F.mhz;
    var sc = svg.parentNode.querySelector(".scale");
    sc.querySelector("[data-lo]").textContent = f(lo);
    sc.querySelector("[data-hi]").textContent = f(hi);
  }

  function bar(m) {
    var p = m.pool, x = 0;
    if (!p) return;
    document.querySelectorAll("rect[data-seg]").forEach(function (r) {
      var b = Math.max(0, p.bar[+r.dataset.seg].bytes), w = p.total_bytes > 0 ? b / p.total_bytes * 1000 : 0;
      r.setAttribute("x", num(x));
      r.setAttribute("width", num(w));
      x += w;
    });
    var t = document.querySelector("[data-bar-title]");
    if (t) {
      t.textContent = "The pool of " + F.bytes(p.total_bytes) + ": " + p.bar.map(function (s) {
        return s.label + " " + F.bytes(s.bytes);
      }).join(", ") + ".";
    }
  }

  function apply(m) {
    document.querySelectorAll("[data-k]").forEach(function (el) {
      var f = el.dataset.f, v = get(m, el.dataset.k);
      if (f === "state") {
        el.dataset.state = v;
        if (el.dataset.t) el.textContent = get(m, el.dataset.t);
        return;
      }
      if (f === "okstate") { el.dataset.state = v ? "ok" : "failing"; return; }
      if (f === "text") { el.hidden = !v; el.textContent = v || ""; return; }
      if (el.id === "generated") { el.textContent = v; el.setAttribute("datetime", v); return; }
      el.textContent = v == null && f !== "cap" ? (missing[f] || "not reported") : F[f](v);
      if (el.tagName === "DATA") el.setAttribute("value", String(v));
    });
    document.querySelectorAll("[data-list]").forEach(function (ul) {
      var items = get(m, ul.dataset.list) || [];
      ul.replaceChildren.apply(ul, items.map(function (t) {
        var li = document.createElement("li");
        li.textContent = t;
        return li;
      }));
    });
    document.querySelectorAll("svg[data-chart]").forEach(function (svg) { chart(svg, m); });
    bar(m);
  }

  function reload() {
    return fetch("./", { cache: "no-store", credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("page: HTTP " + r.status);
      return r.text();
    }).then(function (html) {
      var next = new DOMParser().parseFromString(html, "text/html").getElementById("status");
      if (!next) throw new Error("page: no status in the answer");
      main.replaceChildren.apply(main, Array.prototype.slice.call(next.childNodes));
      main.dataset.shape = next.dataset.shape;
      main.dataset.swaps = String((+main.dataset.swaps || 0) + 1);
    });
  }

  function tick() {
    fetch(api, { cache: "no-store", credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error("status: HTTP " + r.status);
      return r.json();
    }).then(function (m) {
      if (shape(m) !== main.dataset.shape) return reload();
      apply(m);
    }).then(function () {
      main.dataset.updates = String((+main.dataset.updates || 0) + 1);
      if (live) { live.dataset.live = "on"; live.textContent = "live, refreshed every " + every / 1000 + " s"; }
    }, function () {
      // The exporter restarting or the network going: say so, keep trying.
      if (live) { live.dataset.live = "off"; live.textContent = "not refreshing: the exporter did not answer; retrying"; }
    }).then(function () { setTimeout(tick, every); });
  }
  tick();
})();
