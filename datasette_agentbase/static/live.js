/* AgentBase live pages (live_pages.py): an open conversation or session list shows what an export
   added, without a reload. Every few seconds it asks the snapshot's version (a tiny JSON answer);
   when it changed, a conversation fetches its new cards (drawn by the server with the page's own
   template) and a session list fetches itself, and only what differs changes on the page: new cards
   and rows are added, changed ones replaced (their open folds kept open), the reader's place kept.
   A badge says "live", or "paused" when the tab is hidden or the server does not answer. HTML comes
   only from this site's answers, parsed inert (a <template>, a DOMParser document) before it is
   placed; nothing here runs without JavaScript, and the page is as the server drew it. */
(function () {
  "use strict";

  var script = document.currentScript;
  if (!script || !window.fetch) return;
  var version = script.getAttribute("data-ab-version") || "";
  var versionHref = script.getAttribute("data-ab-version-href");
  var sinceHref = script.getAttribute("data-ab-since-href");
  var poll = parseInt(script.getAttribute("data-ab-poll"), 10) || 2000;
  var RETRY_MS = 5000; // while the server does not answer
  var FLASH_MS = 4000; // how long a new card or row stays marked
  if (!versionHref) return;

  // what the page is doing, for the curious (and the browser test): its state, the version it shows,
  // how many updates it took in, how many cards or rows they added, its last state changes
  var status = window.agentbaseLive = {state: "starting", version: version, updates: 0, added: 0, why: "", log: []};
  var timer = null;
  var busy = false;
  var badge = null;
  var firstNew = null;

  function start() {
    badge = document.createElement("div");
    badge.className = "ab-live";
    badge.setAttribute("role", "status");
    badge.setAttribute("aria-live", "polite");
    document.body.appendChild(badge);
    show("live", "");
    document.addEventListener("visibilitychange", function () {
      if (document.hidden) {
        clearTimeout(timer);
        show("paused", "the tab is hidden");
      } else {
        later(0);
      }
    });
    later(document.hidden ? -1 : poll);
    if (document.hidden) show("paused", "the tab is hidden");
  }

  function show(state, why) {
    if (state !== status.state || why !== status.why) {
      status.log.push(state + (why ? ": " + why : ""));
      if (status.log.length > 20) status.log.shift();
    }
    status.state = state;
    status.why = why;
    var drawn = state + "|" + why + "|" + status.added;
    if (badge.getAttribute("data-drawn") === drawn) return; // (unchanged: nothing re-announced every poll)
    badge.setAttribute("data-drawn", drawn);
    badge.className = "ab-live" + (state === "live" ? "" : " ab-live-paused");
    badge.title = state === "live"
      ? "This page follows the archive: what an export adds shows here within seconds, without a reload."
      : "Paused: " + why + ". The page is as last updated; it follows again by itself.";
    badge.textContent = state;
    if (state === "live" && status.added && firstNew && firstNew.isConnected) {
      var jump = document.createElement("a");
      jump.href = "#" + (firstNew.id || "");
      jump.textContent = status.added + " new";
      jump.addEventListener("click", function (event) {
        event.preventDefault();
        firstNew.scrollIntoView({block: "start"});
      });
      badge.appendChild(document.createTextNode(" · "));
      badge.appendChild(jump);
    }
  }

  function later(ms) {
    clearTimeout(timer);
    if (ms >= 0) timer = setTimeout(tick, ms);
  }

  function get(url, asText) {
    return fetch(url, {credentials: "same-origin", cache: "no-store",
                       headers: {Accept: asText ? "text/html" : "application/json"}})
      .then(function (r) {
        if (r.status === 401 || r.status === 403) throw new Error("the login is needed again (reload the page)");
        if (!r.ok) throw new Error("the server answered " + r.status);
        return asText ? r.text() : r.json();
      });
  }

  function tick() {
    if (busy) return;
    if (document.hidden) { show("paused", "the tab is hidden"); return; }
    busy = true;
    get(versionHref)
      .then(function (doc) {
        if (doc && doc.version && doc.version !== version) {
          return (sinceHref ? conversation() : sessionList()).then(function () { status.updates++; });
        }
      })
      .then(function () {
        busy = false;
        show("live", "");
        later(poll);
      }, function (err) {
        busy = false;
        show("paused", err && err.message && /^the /.test(err.message) ? err.message : "the server does not answer");
        later(RETRY_MS);
      });
  }

  // -- placing what arrived ------------------------------------------------------------------------------

  function parse(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    return Array.prototype.slice.call(t.content.children);
  }

  function same(a, b) {
    if (a.length !== b.length) return false;
    for (var i = 0; i < a.length; i++) if (!a[i].isEqualNode(b[i])) return false;
    return true;
  }

  function details(nodes) {
    var out = [];
    nodes.forEach(function (n) {
      if (n.tagName === "DETAILS") out.push(n);
      out.push.apply(out, n.querySelectorAll("details"));
    });
    return out;
  }

  function keepOpen(from, to) {
    // a card drawn again (a result arrived under its call): the folds the reader opened stay open
    var a = details(from), b = details(to);
    if (a.length !== b.length) return;
    for (var i = 0; i < a.length; i++) b[i].open = a[i].open;
  }

  function placeAfter(parent, prev, node) {
    var next = prev ? prev.nextElementSibling : parent.firstElementChild;
    if (next !== node) parent.insertBefore(node, prev ? prev.nextSibling : parent.firstChild);
  }

  function unflash(node) {
    node.classList.remove("ab-live-new", "ab-live-changed");
    if (!node.classList.length) node.removeAttribute("class");
  }

  function flash(node, css) {
    node.classList.add(css);
    setTimeout(function () { unflash(node); }, FLASH_MS);
  }

  function isNearBottom() {
    var doc = document.documentElement;
    return window.innerHeight + window.scrollY >= doc.scrollHeight - 40;
  }

  /* Groups of keyed nodes under ``parent`` ({key, nodes}) are made what ``wanted`` says, from the group
     ``fromKey`` on (every group when null): equal groups stay as they are, changed ones are replaced,
     new ones added, the others removed. Returns the first node added. */
  function reconcile(parent, groups, fromKey, wanted) {
    var start = 0;
    if (fromKey !== null && fromKey !== undefined) {
      start = groups.map(function (g) { return g.key; }).indexOf(fromKey);
      if (start < 0) start = 0;
    }
    var tail = groups.slice(start);
    var byKey = {};
    tail.forEach(function (g) { byKey[g.key] = g; });
    var prev = start > 0 ? groups[start - 1].nodes[groups[start - 1].nodes.length - 1] : null;
    var used = {};
    var added = null;
    wanted.forEach(function (w) {
      var old = Object.prototype.hasOwnProperty.call(byKey, w.key) && !used[w.key] ? byKey[w.key] : null;
      var nodes = w.nodes;
      if (old) old.nodes.forEach(unflash); // (the server never draws these classes)
      if (old && same(old.nodes, nodes)) {
        nodes = old.nodes;
      } else if (old) {
        keepOpen(old.nodes, nodes);
        old.nodes.forEach(function (n) { n.remove(); });
        flash(nodes[0], "ab-live-changed");
      } else {
        flash(nodes[0], "ab-live-new");
        if (!added) added = nodes[0];
        status.added++;
      }
      used[w.key] = true;
      nodes.forEach(function (n) { placeAfter(parent, prev, n); prev = n; });
    });
    tail.forEach(function (g) {
      if (!used[g.key]) g.nodes.forEach(function (n) { n.remove(); });
    });
    return added;
  }

  function replaceIfChanged(current, fresh) {
    if (current && fresh && !current.isEqualNode(fresh)) current.replaceWith(fresh);
  }

  function follow(wasAtBottom, added) {
    if (added) firstNew = firstNew && firstNew.isConnected ? firstNew : added;
    // a reader at the end of the page goes on reading there (tail -f); anyone else keeps their place
    if (wasAtBottom && added) window.scrollTo(0, document.documentElement.scrollHeight);
  }

  // -- a conversation ------------------------------------------------------------------------------------

  function cards(root) {
    // a card: an element with an id and the elements without one that follow it (as live_pages.split)
    var out = [];
    Array.prototype.forEach.call(root.children, function (el) {
      if (el.id || !out.length) out.push({key: el.id || "", nodes: [el]});
      else out[out.length - 1].nodes.push(el);
    });
    return out;
  }

  function conversation() {
    var root = document.querySelector(".ab-conversation");
    if (!root) return Promise.resolve();
    var have = cards(root);
    var last = have.length ? have[have.length - 1].key : "";
    return get(sinceHref + (sinceHref.indexOf("?") < 0 ? "?" : "&") + "after=" + encodeURIComponent(last))
      .then(function (doc) {
        var bottom = isNearBottom();
        root = document.querySelector(".ab-conversation");
        if (!root) return;
        var wanted = doc.cards.map(function (c) { return {key: c.key, nodes: parse(c.html)}; })
          .filter(function (w) { return w.nodes.length; });
        var added = reconcile(root, cards(root), doc.from, wanted);
        if (doc.totals) replaceIfChanged(document.querySelector("table.ab-totals"), parse(doc.totals)[0]);
        follow(bottom, added);
        version = status.version = doc.version || version;
      });
  }

  // -- the session list ----------------------------------------------------------------------------------

  function rows(table) {
    var body = table && table.tBodies[0];
    if (!body) return [];
    return Array.prototype.map.call(body.rows, function (tr) {
      return {key: tr.getAttribute("data-id") || "", nodes: [tr]};
    });
  }

  function sessionList() {
    return get(location.href, true).then(function (text) {
      var doc = new DOMParser().parseFromString(text, "text/html");
      var drawn = doc.querySelector("script[data-ab-version]");
      var bottom = isNearBottom();
      var table = document.querySelector("table.ab-session-list");
      var freshTable = doc.querySelector("table.ab-session-list");
      var added = null;
      if (table && freshTable && table.tBodies[0] && freshTable.tBodies[0]) {
        var wanted = rows(freshTable).map(function (r) {
          return {key: r.key, nodes: [document.importNode(r.nodes[0], true)]};
        });
        added = reconcile(table.tBodies[0], rows(table), null, wanted);
      } else {
        // the list was empty, or is now: its table or its "no session" line, as the server drew it
        var here = table || document.querySelector(".ab-nodata");
        var there = freshTable || doc.querySelector(".ab-nodata");
        if (here && there) here.replaceWith(document.importNode(there, true));
      }
      [".ab-range", ".ab-next-page", ".ab-search-messages"].forEach(function (selector) {
        var there = doc.querySelector(selector);
        replaceIfChanged(document.querySelector(selector), there && document.importNode(there, true));
      });
      follow(bottom, added);
      version = status.version = (drawn && drawn.getAttribute("data-ab-version")) || version;
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
