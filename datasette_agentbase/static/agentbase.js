/* AgentBase conversation view: expand or collapse all thinking (or everything), and find within
   the session (next / previous match, the folds around a match opened). Served by the plugin and
   inlined in the HTML export; loads nothing. The page reads the same without it: the toolbar stays
   hidden. Transcript text is only ever read (textContent) and wrapped in <mark>, never parsed as HTML. */
(function () {
  "use strict";

  function start() {
    var root = document.querySelector(".ab-conversation");
    var bar = document.querySelector(".ab-toolbar");
    if (!root || !bar) return;
    bar.hidden = false;

    function openAncestors(node) {
      for (var el = node && node.parentElement; el; el = el.parentElement) {
        if (el.tagName === "DETAILS" && !el.open) el.open = true;
      }
    }

    // -- expand / collapse
    bar.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-ab-open]");
      if (!button) return;
      var open = button.getAttribute("data-ab-state") === "1";
      var selector = button.getAttribute("data-ab-open") === "thinking" ? "details.ab-thinking" : "details";
      var all = root.querySelectorAll(selector);
      for (var i = 0; i < all.length; i++) all[i].open = open;
    });

    // -- a link to a message inside a fold (a repeated error, a long result) opens the fold
    function revealHash() {
      if (!location.hash || location.hash.length < 2) return;
      var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
      if (target && root.contains(target)) {
        openAncestors(target);
        target.scrollIntoView({block: "start"});
      }
    }
    window.addEventListener("hashchange", revealHash);
    revealHash();

    // -- find
    var input = bar.querySelector(".ab-find-input");
    var count = bar.querySelector(".ab-find-count");
    var MAX_HITS = 5000;
    var hits = [];
    var current = -1;
    var timer = null;
    var searched = "";

    function clear() {
      var parents = [];
      for (var i = 0; i < hits.length; i++) {
        var mark = hits[i];
        var parent = mark.parentNode;
        if (!parent) continue;
        parent.replaceChild(document.createTextNode(mark.textContent), mark);
        if (parents.indexOf(parent) < 0) parents.push(parent);
      }
      for (var j = 0; j < parents.length; j++) parents[j].normalize();
      hits = [];
      current = -1;
    }

    function escapeRegExp(s) {
      return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    }

    function search(query) {
      searched = query;
      clear();
      if (!query) {
        count.textContent = "";
        return;
      }
      var pattern = new RegExp(escapeRegExp(query), "gi");
      var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
        acceptNode: function (node) {
          var parent = node.parentNode;
          var tag = parent && parent.nodeName;
          if (tag === "SCRIPT" || tag === "STYLE") return NodeFilter.FILTER_REJECT;
          // a fold's one-line preview repeats what the fold holds: found there, not twice
          if (parent && parent.closest && parent.closest(".ab-preview")) return NodeFilter.FILTER_REJECT;
          return node.nodeValue && node.nodeValue.length >= query.length
            ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
        }
      });
      var nodes = [];
      while (walker.nextNode()) nodes.push(walker.currentNode);
      var capped = false;
      for (var n = 0; n < nodes.length && !capped; n++) {
        var node = nodes[n];
        var text = node.nodeValue;
        var found = [];
        pattern.lastIndex = 0;
        var m;
        while ((m = pattern.exec(text)) !== null) {
          if (m[0].length === 0) { pattern.lastIndex++; continue; }
          found.push([m.index, m[0].length]);
          if (hits.length + found.length >= MAX_HITS) { capped = true; break; }
        }
        // wrap from the end, so the earlier offsets stay right
        var marks = [];
        for (var k = found.length - 1; k >= 0; k--) {
          var at = found[k][0], len = found[k][1];
          var tail = node.splitText(at);
          tail.splitText(len);
          var mark = document.createElement("mark");
          mark.className = "ab-find-hit";
          mark.textContent = tail.nodeValue;
          tail.parentNode.replaceChild(mark, tail);
          marks.unshift(mark);
        }
        hits.push.apply(hits, marks);
      }
      if (!hits.length) {
        count.textContent = "no match";
        return;
      }
      go(0, capped);
    }

    function go(index, capped) {
      if (!hits.length) return;
      if (current >= 0 && hits[current]) hits[current].classList.remove("ab-find-current");
      current = (index + hits.length) % hits.length;
      var hit = hits[current];
      hit.classList.add("ab-find-current");
      openAncestors(hit);
      hit.scrollIntoView({block: "center"});
      count.textContent = (current + 1) + " of " + hits.length + (capped || hits.length >= MAX_HITS ? "+" : "");
    }

    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { search(input.value); }, 200);
    });
    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter") {
        event.preventDefault();
        clearTimeout(timer);
        if (input.value !== searched) {
          search(input.value);
        } else {
          go(current + (event.shiftKey ? -1 : 1));
        }
      } else if (event.key === "Escape") {
        input.value = "";
        search("");
      }
    });
    input.addEventListener("search", function () { if (!input.value) search(""); });
    bar.querySelector(".ab-find-next").addEventListener("click", function () { go(current + 1); });
    bar.querySelector(".ab-find-prev").addEventListener("click", function () { go(current - 1); });
    // Ctrl+F / Cmd+F reaches the browser's own find; "/" focuses this one (as on many sites)
    document.addEventListener("keydown", function (event) {
      if (event.key === "/" && document.activeElement && !/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName)) {
        event.preventDefault();
        input.focus();
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
