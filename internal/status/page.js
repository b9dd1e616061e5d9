// The status page's refresh: every few seconds it fetches the page's
// figures as the server renders them (a View: texts, states, chart
// drawings) and puts each in its place; it formats nothing itself. When the
// page's structure changes (a GPU, a workload, a plan appears or goes), it
// fetches the page again and swaps its body instead.
(function () {
  "use strict";
  var main = document.getElementById("status");
  var view = main && main.dataset.view;
  if (!view) return;
  var every = +main.dataset.refresh || 5000;
  var live = document.getElementById("live");

  function has(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }

  function apply(v) {
    document.querySelectorAll("[data-k]").forEach(function (el) {
      var k = el.dataset.k;
      if (has(v.state, k)) el.dataset.state = v.state[k];
      if (has(v.text, k)) {
        el.textContent = v.text[k];
        if (el.hasAttribute("data-hide-empty")) el.hidden = !v.text[k];
        if (el.tagName === "TIME") el.setAttribute("datetime", v.text[k]);
      }
      if (has(v.value, k)) el.setAttribute("value", v.value[k]);
    });
    document.querySelectorAll("[data-list]").forEach(function (ul) {
      var items = v.lists[ul.dataset.list] || [];
      ul.replaceChildren.apply(ul, items.map(function (t) {
        var li = document.createElement("li");
        li.textContent = t;
        return li;
      }));
    });
    document.querySelectorAll("svg[data-c]").forEach(function (svg) {
      var c = v.charts[svg.dataset.c];
      if (!c) return;
      svg.querySelector("polyline").setAttribute("points", c.points);
      svg.querySelector("[data-desc]").textContent = c.desc;
      svg.querySelectorAll("line.ref").forEach(function (l, i) {
        l.setAttribute("y1", c.lines[i]);
        l.setAttribute("y2", c.lines[i]);
      });
      var sc = svg.parentNode.querySelector(".scale");
      sc.querySelector("[data-lo]").textContent = c.lo;
      sc.querySelector("[data-hi]").textContent = c.hi;
    });
    document.querySelectorAll("rect[data-seg]").forEach(function (r) {
      var s = v.bar && v.bar[+r.dataset.seg];
      if (!s) return;
      r.setAttribute("x", s.x);
      r.setAttribute("width", s.width);
    });
    var t = document.querySelector("[data-bar-title]");
    if (t && v.bar_title) t.textContent = v.bar_title;
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
    fetch(view, { cache: "no-store", credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error("status: HTTP " + r.status);
      return r.json();
    }).then(function (v) {
      if (v.shape !== main.dataset.shape) return reload();
      apply(v);
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
