/* app/report/page.js: the one nicety of --report's page (inlined by
   report_html.c): pointing at a mark highlights every mark of its kind in
   that figure.  The page reads the same without it. */
(function () {
  "use strict";
  document.querySelectorAll("svg.fig").forEach(function (svg) {
    svg.addEventListener("mouseover", function (e) {
      var k = e.target.getAttribute && e.target.getAttribute("data-kind");
      if (!k) return;
      svg.classList.add("hl");
      svg.querySelectorAll("rect.ev").forEach(function (r) {
        r.classList.toggle("on", r.getAttribute("data-kind") === k);
      });
    });
    svg.addEventListener("mouseleave", function () { svg.classList.remove("hl"); });
  });
})();
