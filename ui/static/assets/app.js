// weir console: a single-page app over weir's JSON API and admin API.
// Every piece of data goes into the DOM as text (textContent, text nodes,
// attribute values), never as markup.
'use strict';
(() => {
  // The SVG namespace, from an <svg> the HTML parser made.
  const SVGNS = document.getElementById('svg-proto').namespaceURI;
  const TOKEN_KEY = 'weir.adminToken';
  const SAMPLE_EVERY = 5000; // ms between samples of /api/status and /metrics
  const MAX_SAMPLES = 120; // samples kept: 10 minutes
  const PAGE_SIZE = 25;

  const main = document.getElementById('main');
  const flashEl = document.getElementById('flash');
  const authEl = document.getElementById('auth');
  let pageTimers = []; // intervals of the page on show, cleared on leaving it

  // DOM helpers.

  // h makes an element: attrs sets properties for value, checked and
  // disabled, listeners for on*, attributes otherwise; children are nodes
  // or text.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    add(el, children);
    return el;
  }

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.setAttribute('class', v);
      else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'selected') el[k] = v;
      else el.setAttribute(k, String(v));
    }
  }

  function add(el, ...children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }

  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    add(el, children);
    return el;
  }

  function fill(el, ...children) {
    el.replaceChildren();
    add(el, children);
    return el;
  }

  // fillFrom fills el from what data is, unless el already shows that
  // data: a list redrawn unchanged on each sample would take a click
  // that lands while its buttons are being replaced.
  function fillFrom(el, data, ...children) {
    const key = JSON.stringify(data);
    if (el.dataset.shows === key) return el;
    el.dataset.shows = key;
    return fill(el, ...children);
  }

  function errorBox(err) {
    return h('div', { class: 'error', role: 'alert' }, err instanceof Error ? err.message : String(err));
  }

  let flashTimer = 0;
  function flash(msg, bad) {
    flashEl.textContent = msg;
    flashEl.className = bad ? 'flash bad' : 'flash';
    flashEl.hidden = false;
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => { flashEl.hidden = true; }, bad ? 15000 : 6000);
  }

  function fmtTime(t) {
    if (!t) return '';
    const d = new Date(t);
    return isNaN(d) ? String(t) : d.toLocaleString();
  }

  function stateTag(st) {
    return h('span', { class: 'state state-' + String(st).replace(/[^a-z-]/g, '') }, st);
  }

  function fields(pairs) {
    const dl = h('dl', { class: 'fields' });
    for (const [k, v] of pairs) {
      if (v === undefined || v === null || v === '') continue;
      add(dl, [h('dt', null, k), h('dd', null, v)]);
    }
    return dl;
  }

  function table(headers, rows) {
    return h('table', null,
      h('thead', null, h('tr', null, headers.map((x) => (x instanceof Node ? h('th', null, x) : h('th', { class: x.endsWith('#') ? 'num' : '' }, x.replace(/#$/, '')))))),
      h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: headers.length, class: 'muted' }, 'none'))));
  }

  function json(v) {
    return h('pre', null, JSON.stringify(v, null, 2));
  }

  // The API.

  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // send calls the API with the admin token, and answers the response when
  // it is a success, or throws an APIError whose message is the answer's
  // "error". A POST always says Content-Type: application/json, body or
  // none: the admin API refuses a POST without it (a guard against
  // cross-site forms).
  async function send(method, path, body, accept) {
    const headers = { Accept: accept || 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = 'Bearer ' + token;
    const init = { method, headers, cache: 'no-store' };
    if (method === 'POST' || body !== undefined) headers['Content-Type'] = 'application/json';
    if (body !== undefined) init.body = JSON.stringify(body);
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      throw new APIError(0, method + ' ' + path + ': the server did not answer (' + e.message + ')');
    }
    if (!resp.ok) {
      const text = await resp.text();
      let data = null;
      try {
        data = text ? JSON.parse(text) : null;
      } catch (e) {
        data = null;
      }
      const msg = data && typeof data.error === 'string' ? data.error : resp.status + ' ' + resp.statusText;
      if (resp.status === 401) askToken(msg);
      throw new APIError(resp.status, msg);
    }
    return resp;
  }

  // api calls the API and answers the decoded JSON, or throws an APIError
  // whose message is the answer's "error".
  async function api(method, path, body) {
    const resp = await send(method, path, body);
    const text = await resp.text();
    try {
      return text ? JSON.parse(text) : null;
    } catch (e) {
      return null;
    }
  }

  // download fetches path with the admin token and saves the answer as
  // name: a plain link would carry no token.
  async function download(path, name) {
    try {
      const resp = await send('GET', path, undefined, 'application/x-ndjson');
      const blobURL = URL.createObjectURL(await resp.blob());
      const a = h('a', { href: blobURL, download: name, hidden: true });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(blobURL), 60000);
    } catch (e) {
      flash(e.message, true);
    }
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    const str = q.toString();
    return str ? '?' + str : '';
  }

  // The token.

  function showAuth() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) {
      fill(authEl, 'admin token set', h('button', { type: 'button', onclick: () => { sessionStorage.removeItem(TOKEN_KEY); showAuth(); } }, 'Forget'));
    } else {
      fill(authEl, h('button', { type: 'button', onclick: () => askToken('') }, 'Set admin token'));
    }
  }

  let asking = false;
  function askToken(why) {
    if (asking) return;
    asking = true;
    const input = h('input', { type: 'password', autocomplete: 'off', placeholder: 'WEIR_ADMIN_TOKEN', id: 'token-input' });
    const box = h('div', { class: 'card tokenbox' },
      h('h2', null, 'Admin token'),
      why ? h('p', { class: 'error' }, why) : null,
      h('p', { class: 'muted' }, 'The admin API wants the token weir run was given (WEIR_ADMIN_TOKEN). It is kept in this tab only (sessionStorage).'),
      h('form', {
        onsubmit: (e) => {
          e.preventDefault();
          if (input.value) sessionStorage.setItem(TOKEN_KEY, input.value);
          asking = false;
          showAuth();
          route();
        },
      }, input, h('button', { class: 'primary', type: 'submit' }, 'Use token')));
    stopPage();
    fill(main, box);
    input.focus();
  }

  // Samples for the overview's charts, taken from the start whatever the
  // page, so that the charts have a history when the overview is shown.

  const samples = [];

  // metricSum sums every series of the named metric in Prometheus text.
  function metricSum(text, name) {
    let sum = 0;
    let found = false;
    for (const line of text.split('\n')) {
      if (!line.startsWith(name)) continue;
      const next = line.charAt(name.length);
      if (next !== ' ' && next !== '{') continue;
      const v = parseFloat(line.slice(line.lastIndexOf(' ') + 1));
      if (!isNaN(v)) {
        sum += v;
        found = true;
      }
    }
    return found ? sum : null;
  }

  async function sample() {
    const t = Date.now();
    const smp = { t };
    try {
      const st = await api('GET', '/api/status');
      smp.status = st;
      smp.deadLetters = st.dead_letters;
      smp.stuck = st.stuck;
    } catch (e) {
      smp.statusError = e.message;
    }
    try {
      // /metrics takes the token too when one is set (weir run's read API).
      const headers = {};
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (token) headers.Authorization = 'Bearer ' + token;
      const resp = await fetch('/metrics', { cache: 'no-store', headers });
      if (resp.ok) {
        const text = await resp.text();
        smp.completed = metricSum(text, 'weir_jobs_completed_total');
        smp.failed = metricSum(text, 'weir_jobs_failed_total');
      }
    } catch (e) {
      // no /metrics: the throughput chart stays empty
    }
    if (sessionStorage.getItem(TOKEN_KEY) !== null || !samples.some((x) => x.outboxDenied)) {
      try {
        const ob = await api('GET', '/api/admin/outbox');
        smp.outbox = ob.pending;
      } catch (e) {
        if (e.status === 401) smp.outboxDenied = true;
      }
    }
    samples.push(smp);
    while (samples.length > MAX_SAMPLES) samples.shift();
    return smp;
  }

  // rates are the per-second deltas of a counter between samples.
  function rates(key) {
    const out = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1];
      const b = samples[i];
      if (a[key] == null || b[key] == null) continue;
      out.push({ t: b.t, v: Math.max(0, b[key] - a[key]) / ((b.t - a.t) / 1000) });
    }
    return out;
  }

  function series(key) {
    return samples.filter((x) => x[key] != null).map((x) => ({ t: x.t, v: x[key] }));
  }

  // Charts, as inline SVG.

  const W = 400;
  const H = 160;
  const PAD = { l: 44, r: 10, t: 10, b: 22 };

  function niceMax(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function fmtNum(v) {
    if (v === 0) return '0';
    if (Math.abs(v) >= 100) return Math.round(v).toString();
    if (Math.abs(v) >= 1) return (Math.round(v * 10) / 10).toString();
    return v.toPrecision(2);
  }

  // lineChart draws points [{t, v}] as a line over time.
  function lineChart(points, label) {
    const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label });
    const iw = W - PAD.l - PAD.r;
    const ih = H - PAD.t - PAD.b;
    const max = niceMax(Math.max(0, ...points.map((p) => p.v)));
    svg.append(
      s('line', { class: 'axis', x1: PAD.l, y1: PAD.t + ih, x2: PAD.l + iw, y2: PAD.t + ih }),
      s('line', { class: 'axis', x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: PAD.t + ih }),
      s('text', { x: PAD.l - 4, y: PAD.t + 8, 'text-anchor': 'end' }, fmtNum(max)),
      s('text', { x: PAD.l - 4, y: PAD.t + ih, 'text-anchor': 'end' }, '0'));
    if (points.length < 2) {
      svg.append(s('text', { x: PAD.l + iw / 2, y: PAD.t + ih / 2, 'text-anchor': 'middle' }, 'collecting samples…'));
      return svg;
    }
    const t0 = points[0].t;
    const span = Math.max(1, points[points.length - 1].t - t0);
    const xy = points.map((p) => [PAD.l + ((p.t - t0) / span) * iw, PAD.t + ih - (p.v / max) * ih]);
    const d = xy.map(([x, y], i) => (i ? 'L' : 'M') + x.toFixed(1) + ' ' + y.toFixed(1)).join(' ');
    svg.append(
      s('path', { class: 'area', d: d + ` L${(PAD.l + iw).toFixed(1)} ${PAD.t + ih} L${PAD.l} ${PAD.t + ih} Z` }),
      s('path', { class: 'line', d }),
      s('text', { x: PAD.l, y: H - 6 }, new Date(t0).toLocaleTimeString()),
      s('text', { x: PAD.l + iw, y: H - 6, 'text-anchor': 'end' }, 'now ' + fmtNum(points[points.length - 1].v)));
    return svg;
  }

  // barChart draws [{label, value}] as bars.
  function barChart(items, label) {
    const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label });
    const iw = W - PAD.l - PAD.r;
    const ih = H - PAD.t - PAD.b;
    const max = niceMax(Math.max(0, ...items.map((x) => x.value)));
    svg.append(
      s('line', { class: 'axis', x1: PAD.l, y1: PAD.t + ih, x2: PAD.l + iw, y2: PAD.t + ih }),
      s('text', { x: PAD.l - 4, y: PAD.t + 8, 'text-anchor': 'end' }, fmtNum(max)));
    const slot = iw / Math.max(1, items.length);
    items.forEach((it, i) => {
      const bh = (it.value / max) * ih;
      const x = PAD.l + i * slot + slot * 0.15;
      svg.append(
        s('rect', { class: 'bar', x: x.toFixed(1), y: (PAD.t + ih - bh).toFixed(1), width: (slot * 0.7).toFixed(1), height: bh.toFixed(1) },
          s('title', null, it.label + ': ' + it.value)),
        s('text', { x: (x + slot * 0.35).toFixed(1), y: H - 6, 'text-anchor': 'middle' }, it.label),
        s('text', { x: (x + slot * 0.35).toFixed(1), y: (PAD.t + ih - bh - 3).toFixed(1), 'text-anchor': 'middle' }, String(it.value)));
    });
    return svg;
  }

  // Routing: #/page[/id][?params].

  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, '');
    const qi = raw.indexOf('?');
    const path = qi < 0 ? raw : raw.slice(0, qi);
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    return { page: parts[0] || 'overview', id: parts[1], params: new URLSearchParams(qi < 0 ? '' : raw.slice(qi + 1)) };
  }

  function link(page, id, params) {
    let out = '#/' + page;
    if (id !== undefined && id !== null) out += '/' + encodeURIComponent(id);
    const q = params ? new URLSearchParams(params).toString() : '';
    return q ? out + '?' + q : out;
  }

  function stopPage() {
    for (const t of pageTimers) clearInterval(t);
    pageTimers = [];
  }

  function every(ms, fn) {
    pageTimers.push(setInterval(fn, ms));
  }

  const pages = {
    overview: overviewPage,
    jobs: jobsPage,
    'dead-letters': deadLettersPage,
    workflows: workflowsPage,
    reindex: reindexPage,
  };

  function route() {
    stopPage();
    asking = false;
    const r = parseHash();
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === r.page);
    const page = pages[r.page];
    const view = h('section', { id: 'page-' + r.page });
    fill(main, view);
    if (!page) {
      add(view, errorBox('no page ' + r.page));
      return;
    }
    page(view, r).catch((e) => add(view, errorBox(e)));
  }

  // A filter form: fields [{name, label, options?}] from params; on submit
  // it goes to the page with the form's values (and no cursor).
  function filterForm(page, params, defs) {
    const inputs = {};
    const form = h('form', {
      class: 'filters',
      onsubmit: (e) => {
        e.preventDefault();
        const p = {};
        for (const [name, el] of Object.entries(inputs)) if (el.value) p[name] = el.value;
        location.hash = link(page, null, p);
      },
    });
    for (const d of defs) {
      let el;
      if (d.options) {
        el = h('select', { name: d.name, id: 'filter-' + d.name }, h('option', { value: '' }, 'any'),
          d.options.map((o) => h('option', { value: o, selected: params.get(d.name) === o }, o)));
      } else {
        el = h('input', { name: d.name, id: 'filter-' + d.name, value: params.get(d.name) || '', placeholder: d.placeholder || '' });
      }
      inputs[d.name] = el;
      add(form, h('label', null, d.label, el));
    }
    add(form, h('button', { class: 'primary', type: 'submit' }, 'Filter'),
      h('button', { type: 'button', onclick: () => { location.hash = link(page); } }, 'Clear'));
    return form;
  }

  // pager shows First and Next: the cursor param is set from next.
  function pager(page, params, cursor, next) {
    const p = new URLSearchParams(params);
    const first = new URLSearchParams(params);
    first.delete(cursor);
    const out = h('div', { class: 'pager' });
    if (params.get(cursor)) {
      add(out, h('button', { type: 'button', onclick: () => history.back() }, '← Previous'),
        h('button', { type: 'button', onclick: () => { location.hash = link(page, null, first); } }, 'First page'));
    }
    if (next !== null && next !== undefined) {
      p.set(cursor, next);
      add(out, h('button', { type: 'button', id: 'next-page', onclick: () => { location.hash = link(page, null, p); } }, 'Next page →'));
    } else {
      add(out, h('span', { class: 'muted' }, 'last page'));
    }
    return out;
  }

  // Overview.

  async function overviewPage(view) {
    add(view, h('h1', null, 'Overview'));
    const stats = h('div', { class: 'stats card' });
    const byState = h('div', { class: 'card' });
    const throughput = h('div', { class: 'card' });
    const dead = h('div', { class: 'card' });
    const outbox = h('div', { class: 'card' });
    const breakers = h('div', { class: 'card' });
    const stuck = h('div', { class: 'card' });
    const kinds = h('div', { class: 'card' });
    // The pause form stays in the page while the list above it is
    // redrawn: moving it on each draw took the focus from someone typing
    // into it.
    const pauseList = h('div');
    const paused = h('div', { class: 'card', id: 'pauses' }, pauseList);
    const limited = h('div', { class: 'card', id: 'limits' });
    add(view, stats, h('div', { class: 'grid' }, byState, throughput, dead, outbox, breakers, stuck), paused, limited, kinds);
    add(paused, pauseFormOf(() => sample().then(draw)));

    const draw = async (smp) => {
      const st = smp.status;
      const totals = {};
      if (st) {
        for (const m of Object.values(st.jobs || {})) for (const [state, n] of Object.entries(m)) totals[state] = (totals[state] || 0) + n;
      }
      const thr = rates('completed');
      const last = thr.length ? thr[thr.length - 1].v : null;
      fill(stats,
        smp.statusError ? errorBox(smp.statusError) : null,
        stat('jobs available', totals.available || 0), stat('running', totals.running || 0),
        stat('completed / s', last === null ? '…' : fmtNum(last)),
        stat('stuck', st ? st.stuck : '?'), stat('dead letters', st ? st.dead_letters : '?'),
        stat('outbox pending', smp.outbox == null ? '?' : smp.outbox),
        stat('documents saved', st && st.documents ? st.documents.saved || 0 : '?'));
      const states = ['available', 'scheduled', 'running', 'completed', 'cancelled', 'dead'];
      fill(byState, h('h2', null, 'Jobs by state'), barChart(states.map((x) => ({ label: x, value: totals[x] || 0 })), 'jobs by state'));
      fill(throughput, h('h2', null, 'Throughput (jobs completed per second)'), lineChart(thr, 'throughput'),
        h('p', { class: 'muted' }, 'failed per second now: ' + (rates('failed').length ? fmtNum(rates('failed').slice(-1)[0].v) : '…')));
      fill(dead, h('h2', null, 'Dead letters over time'), lineChart(series('deadLetters'), 'dead letters'));
      fill(outbox, h('h2', null, 'Outbox backlog'), lineChart(series('outbox'), 'outbox backlog'));
      if (st) {
        const kindRows = Object.entries(st.jobs || {}).sort().map(([kind, m]) => h('tr', null, h('td', null, h('a', { href: link('jobs', null, { kind }) }, kind)),
          states.map((x) => h('td', { class: 'num' }, m[x] || 0))));
        fill(kinds, h('h2', null, 'Jobs by kind and state'), table(['kind'].concat(states.map((x) => x + '#')), kindRows));
      }
      try {
        const b = await api('GET', '/api/admin/breakers');
        fillFrom(breakers, b, h('h2', null, 'Breakers'), table(['name', 'state', 'failures#', 'rejected#', 'opened', ''],
          b.breakers.map((br) => h('tr', null, h('td', null, br.name), h('td', null, stateTag(br.state)), h('td', { class: 'num' }, br.failures),
            h('td', { class: 'num' }, br.rejected), h('td', null, fmtTime(br.opened_at)),
            h('td', null, h('button', {
              type: 'button',
              onclick: () => breakerOp(br.name, br.state === 'closed' ? 'open' : 'close').then(() => sample().then(draw)),
            }, br.state === 'closed' ? 'Open' : 'Close'))))));
      } catch (e) {
        fillFrom(breakers, String(e), h('h2', null, 'Breakers'), errorBox(e));
      }
      try {
        const ps = await api('GET', '/api/admin/pauses');
        fillFrom(pauseList, ps, h('h2', null, 'Paused queues and kinds'), table(['queue', 'kind', 'cause', 'by', 'since', 'until', 'reason', ''],
          ps.pauses.map((p) => h('tr', null, h('td', null, p.queue), h('td', null, p.kind || '(all)'), h('td', null, p.cause),
            h('td', null, p.by || ''), h('td', null, fmtTime(p.paused_at)), h('td', null, p.until ? fmtTime(p.until) : 'resumed'),
            h('td', { class: 'wrap' }, p.reason || ''),
            h('td', null, h('button', {
              type: 'button',
              onclick: () => pauseOp('resume', { queue: p.queue, kind: p.kind || '', cause: p.cause }).then(() => sample().then(draw)),
            }, 'Resume'))))));
      } catch (e) {
        fillFrom(pauseList, String(e), h('h2', null, 'Paused queues and kinds'), errorBox(e));
      }
      try {
        const ls = await api('GET', '/api/admin/limits');
        fill(limited, h('h2', null, 'Limits across processes'), ls.limits.length === 0 ? h('p', { class: 'muted' }, 'no limits') :
          table(['key', 'kinds', 'running#', 'max running#', 'rate', 'window starts#', 'since'],
            ls.limits.map((l) => h('tr', null, h('td', null, l.key), h('td', { class: 'wrap' }, l.kinds.join(', ')),
              h('td', { class: 'num' }, l.running), h('td', { class: 'num' }, l.max_running || '-'),
              h('td', null, l.rate ? l.rate + ' per ' + l.per_seconds + ' s' : '-'),
              h('td', { class: 'num' }, l.rate ? l.window_starts : '-'), h('td', null, l.window_start ? fmtTime(l.window_start) : '')))));
      } catch (e) {
        fill(limited, h('h2', null, 'Limits across processes'), errorBox(e));
      }
      try {
        const sk = await api('GET', '/api/admin/stuck?limit=10');
        fill(stuck, h('h2', null, `Stuck work (${sk.stuck} older than ${sk.older_than})`),
          table(['job#', 'kind', 'queue', 'state', 'since'], sk.jobs.map((j) => h('tr', null, h('td', { class: 'num' }, h('a', { href: link('jobs', j.id) }, j.id)),
            h('td', null, j.kind), h('td', null, j.queue), h('td', null, stateTag(j.state)), h('td', null, fmtTime(j.attempted_at || j.scheduled_at))))),
          sk.counts.some((c) => c.stuck > 0) ? table(['queue', 'kind', 'state', 'stuck#'], sk.counts.filter((c) => c.stuck > 0).map((c) =>
            h('tr', null, h('td', null, c.queue), h('td', null, c.kind), h('td', null, c.state), h('td', { class: 'num' }, c.stuck)))) : null);
      } catch (e) {
        fill(stuck, h('h2', null, 'Stuck work'), errorBox(e));
      }
    };
    const smp = samples.length && Date.now() - samples[samples.length - 1].t < SAMPLE_EVERY ? samples[samples.length - 1] : await sample();
    await draw(smp);
    every(SAMPLE_EVERY, () => draw(samples[samples.length - 1]).catch(() => {}));
  }

  function stat(label, value) {
    return h('div', null, h('span', null, label), h('b', { class: 'stat' }, value));
  }

  // pauseOp pauses (op 'pause') or resumes (op 'resume') what body names.
  async function pauseOp(op, body) {
    try {
      if (op === 'pause') {
        const p = await api('POST', '/api/admin/pauses', body);
        flash('paused ' + (p.kind ? 'kind ' + p.kind + ' of ' : '') + 'queue ' + p.queue);
      } else {
        const r = await api('POST', '/api/admin/pauses/resume', body);
        flash('resumed ' + r.resumed.length + ' pause(s) of queue ' + body.queue);
      }
    } catch (e) {
      flash(e.message, true);
    }
  }

  // pauseFormOf is the form that pauses a queue, or a kind within it;
  // then runs after a pause.
  function pauseFormOf(then) {
    const queue = h('input', { name: 'queue', id: 'pause-queue', placeholder: 'queue', required: true });
    const kind = h('input', { name: 'kind', id: 'pause-kind', placeholder: 'kind (all if empty)' });
    const reason = h('input', { name: 'reason', id: 'pause-reason', placeholder: 'reason' });
    return h('form', {
      class: 'filters',
      onsubmit: (e) => {
        e.preventDefault();
        pauseOp('pause', { queue: queue.value, kind: kind.value, by: 'console', reason: reason.value }).then(then);
      },
    }, queue, kind, reason, h('button', { type: 'submit', id: 'pause-button' }, 'Pause'));
  }

  async function breakerOp(name, op) {
    try {
      const b = await api('POST', '/api/admin/breakers/' + encodeURIComponent(name) + '/' + op);
      flash('breaker ' + b.name + ' is ' + b.state);
    } catch (e) {
      flash(e.message, true);
    }
  }

  // Jobs.

  const STATES = ['available', 'scheduled', 'running', 'completed', 'cancelled', 'dead'];

  async function jobsPage(view, r) {
    if (r.id) return jobDetail(view, r.id);
    const p = r.params;
    add(view, h('h1', null, 'Jobs'), filterForm('jobs', p, [
      { name: 'state', label: 'state', options: STATES },
      { name: 'kind', label: 'kind' },
      { name: 'queue', label: 'queue' },
    ]));
    const res = await api('GET', '/api/admin/jobs' + query({ state: p.get('state'), kind: p.get('kind'), queue: p.get('queue'), before: p.get('before'), limit: PAGE_SIZE }));
    add(view, table(['id#', 'kind', 'queue', 'state', 'attempt#', 'created', 'updated', 'last error'], res.jobs.map((j) => {
      const lastErr = j.errors.length ? j.errors[j.errors.length - 1].message : '';
      return h('tr', { class: 'clickable', onclick: () => { location.hash = link('jobs', j.id); } },
        h('td', { class: 'num' }, h('a', { href: link('jobs', j.id) }, j.id)), h('td', null, j.kind), h('td', null, j.queue),
        h('td', null, stateTag(j.state)), h('td', { class: 'num' }, j.attempt + '/' + j.max_attempts),
        h('td', null, fmtTime(j.created_at)), h('td', null, fmtTime(j.updated_at)), h('td', { class: 'wrap' }, lastErr));
    })), pager('jobs', p, 'before', res.next_before));
  }

  async function jobDetail(view, id) {
    add(view, h('p', null, h('a', { href: '#/jobs' }, '← Jobs')));
    const body = h('div');
    add(view, body);
    const show = async () => {
      const j = await api('GET', '/api/admin/jobs/' + encodeURIComponent(id));
      const op = (what) => async () => {
        try {
          const nj = await api('POST', `/api/admin/jobs/${j.id}/${what}`);
          flash(`job ${nj.id}: ${what === 'retry' ? 'retried' : 'cancelled'}, now ${nj.state}`);
        } catch (e) {
          flash(e.message, true);
        }
        await show().catch((e) => add(body, errorBox(e)));
      };
      fill(body,
        h('h1', null, `Job ${j.id} `, stateTag(j.state)),
        h('div', { class: 'toolbar' },
          h('button', { type: 'button', id: 'job-retry', class: 'primary', onclick: op('retry') }, 'Retry'),
          h('button', { type: 'button', id: 'job-cancel', class: 'danger', onclick: op('cancel') }, 'Cancel')),
        h('div', { class: 'grid' },
          h('div', { class: 'card' }, fields([['kind', j.kind], ['queue', j.queue], ['state', j.state], ['attempt', `${j.attempt} of ${j.max_attempts}`],
            ['priority', j.priority], ['source', j.source], ['idempotency key', j.idempotency_key], ['created', fmtTime(j.created_at)],
            ['scheduled', fmtTime(j.scheduled_at)], ['attempted', fmtTime(j.attempted_at)], ['updated', fmtTime(j.updated_at)],
            ['finalized', fmtTime(j.finalized_at)], ['deadline', fmtTime(j.deadline_at)], ['lease owner', j.lease_owner],
            ['lease expires', fmtTime(j.lease_expires_at)]])),
          h('div', { class: 'card' }, h('h2', null, 'Payload'), json(j.payload)),
          j.progress ? jobProgress(j) : null,
          j.output !== undefined ? h('div', { class: 'card', id: 'job-output' }, h('h2', null, 'Output'), json(j.output)) : null),
        h('h2', null, 'Error history'),
        table(['attempt#', 'at', 'type', 'message'], j.errors.map((e) => h('tr', null, h('td', { class: 'num' }, e.attempt), h('td', null, fmtTime(e.at)),
          h('td', null, e.type), h('td', { class: 'wrap' }, e.message)))));
    };
    await show();
  }

  // jobProgress is the card of a job's latest progress: a bar, its
  // message, and the attempt that recorded it (stale when earlier than the
  // job's current attempt).
  function jobProgress(j) {
    const p = j.progress;
    const pct = Math.max(0, Math.min(100, Number(p.percent) || 0));
    const stale = p.attempt < j.attempt ? ` (attempt ${p.attempt}; the job is at attempt ${j.attempt})` : ` (attempt ${p.attempt})`;
    const bar = h('div');
    bar.style.width = pct.toFixed(1) + '%'; // the CSSOM, which the page's CSP allows
    return h('div', { class: 'card', id: 'job-progress' }, h('h2', null, 'Progress'),
      h('div', { class: 'progress', role: 'progressbar', 'aria-valuenow': String(pct), 'aria-valuemin': '0', 'aria-valuemax': '100' }, bar),
      fields([['percent', `${pct}%`], ['message', p.message], ['recorded', fmtTime(p.at) + stale]]));
  }

  // Dead letters.

  const REASONS = ['max_attempts_exceeded', 'ttl_exceeded', 'non_retryable', 'deadline_exceeded', 'retry_after_exceeds_limit'];
  const DL_FILTERS = ['kind', 'queue', 'reason', 'job_id', 'failed_after', 'failed_before'];

  async function deadLettersPage(view, r) {
    if (r.id) return deadLetterDetail(view, r.id);
    const p = r.params;
    add(view, h('h1', null, 'Dead letters'), filterForm('dead-letters', p, [
      { name: 'kind', label: 'kind' },
      { name: 'queue', label: 'queue' },
      { name: 'reason', label: 'reason', options: REASONS },
      { name: 'job_id', label: 'job id', placeholder: 'a job\'s id' },
      { name: 'failed_after', label: 'failed after', placeholder: 'RFC 3339 or age: 24h' },
      { name: 'failed_before', label: 'failed before', placeholder: 'RFC 3339 or age: 1h' },
    ]));
    const filter = {};
    for (const k of DL_FILTERS) if (p.get(k)) filter[k] = p.get(k);
    const res = await api('GET', '/api/admin/dead-letters' + query(Object.assign({}, filter, { after: p.get('after'), limit: PAGE_SIZE })));
    const selected = new Set();
    const boxes = [];
    const reqSel = h('button', { type: 'button', id: 'requeue-selected', class: 'primary', disabled: true }, 'Requeue selected');
    const purgeSel = h('button', { type: 'button', id: 'purge-selected', class: 'danger', disabled: true }, 'Purge selected');
    const count = h('span', { class: 'muted', id: 'selected-count' }, '0 selected');
    const sync = () => {
      reqSel.disabled = purgeSel.disabled = selected.size === 0;
      count.textContent = selected.size + ' selected';
    };
    const all = h('input', {
      type: 'checkbox',
      id: 'select-all',
      title: 'select all on this page',
      onchange: () => {
        for (const b of boxes) {
          b.checked = all.checked;
          if (all.checked) selected.add(Number(b.dataset.id));
          else selected.delete(Number(b.dataset.id));
        }
        sync();
      },
    });
    const described = Object.keys(filter).length ? Object.entries(filter).map(([k, v]) => k + '=' + v).join(', ') : 'every dead letter';
    const bulk = async (op, sel) => {
      const purge = op === 'purge';
      // The body's job_id is a number; the query string's is text.
      const body = sel ? { ids: [...selected] } : { filter: Object.assign({}, filter, filter.job_id ? { job_id: Number(filter.job_id) } : {}) };
      if (purge) {
        const what = sel ? `${selected.size} dead letter(s)` : `every dead letter matching the filter (${described})`;
        if (!confirm(`Purge ${what}? Their jobs are deleted; this cannot be undone.`)) return;
        if (!sel) body.confirm = true;
      } else if (!sel) {
        if (!confirm(`Requeue every dead letter matching the filter (${described})? Each runs again as a new job.`)) return;
        body.confirm = true;
      }
      try {
        const out = await api('POST', '/api/admin/dead-letters/' + op, body);
        if (purge) flash(`purged ${out.purged} dead letter(s)`);
        else flash(`requeued ${out.requeued} dead letter(s)` + (out.job_ids.length ? ': job ' + out.job_ids.join(', ') : ''));
        route();
      } catch (e) {
        flash(e.message, true);
      }
    };
    reqSel.addEventListener('click', () => bulk('requeue', true));
    purgeSel.addEventListener('click', () => bulk('purge', true));
    add(view, h('div', { class: 'toolbar' }, reqSel, purgeSel, count,
      h('button', { type: 'button', id: 'requeue-filter', onclick: () => bulk('requeue', false) }, 'Requeue all matching the filter'),
      h('button', { type: 'button', id: 'purge-filter', class: 'danger', onclick: () => bulk('purge', false) }, 'Purge all matching the filter'),
      h('a', {
        href: '/api/admin/dead-letters/export' + query(filter), id: 'export', class: 'muted',
        title: 'download the dead letters matching the filter as JSON Lines (sent with the admin token, if one is set)',
        onclick: (ev) => { ev.preventDefault(); download('/api/admin/dead-letters/export' + query(filter), 'dead-letters.jsonl'); },
      }, 'export (JSON Lines)')));
    const rows = res.dead_letters.map((d) => {
      const box = h('input', {
        type: 'checkbox',
        class: 'dl-select',
        'data-id': d.id,
        'aria-label': 'select dead letter ' + d.id,
        onclick: (e) => e.stopPropagation(),
        onchange: () => {
          if (box.checked) selected.add(d.id);
          else selected.delete(d.id);
          sync();
        },
      });
      boxes.push(box);
      return h('tr', { class: 'clickable', 'data-id': d.id, onclick: () => { location.hash = link('dead-letters', d.id); } },
        h('td', null, box), h('td', { class: 'num' }, h('a', { href: link('dead-letters', d.id), onclick: (e) => e.stopPropagation() }, d.id)),
        h('td', { class: 'num' }, d.job_id), h('td', null, d.kind), h('td', null, d.queue), h('td', null, d.abandoned_reason),
        h('td', { class: 'num' }, d.attempt_count), h('td', { class: 'wrap' }, d.last_error), h('td', null, fmtTime(d.failed_at)));
    });
    add(view, table([all, 'id#', 'job#', 'kind', 'queue', 'reason', 'attempts#', 'last error', 'failed'], rows), pager('dead-letters', p, 'after', res.next_after));
  }

  async function deadLetterDetail(view, id) {
    add(view, h('p', null, h('a', { href: '#/dead-letters' }, '← Dead letters')));
    const d = await api('GET', '/api/admin/dead-letters/' + encodeURIComponent(id));
    const op = (what) => async () => {
      if (what === 'purge' && !confirm(`Purge dead letter ${d.id}? Its job ${d.job_id} is deleted; this cannot be undone.`)) return;
      try {
        const out = await api('POST', '/api/admin/dead-letters/' + what, { ids: [d.id] });
        flash(what === 'purge' ? `purged ${out.purged} dead letter(s)` : `requeued dead letter ${d.id} as job ${out.job_ids.join(', ')}`);
        location.hash = '#/dead-letters';
      } catch (e) {
        flash(e.message, true);
      }
    };
    add(view, h('h1', null, `Dead letter ${d.id}`),
      h('div', { class: 'toolbar' },
        h('button', { type: 'button', id: 'dl-requeue', class: 'primary', onclick: op('requeue') }, 'Requeue'),
        h('button', { type: 'button', id: 'dl-purge', class: 'danger', onclick: op('purge') }, 'Purge'),
        h('a', { href: link('jobs', d.job_id) }, 'job ' + d.job_id)),
      h('div', { class: 'grid' },
        h('div', { class: 'card' }, fields([['job', d.job_id], ['kind', d.kind], ['queue', d.queue], ['source', d.source],
          ['idempotency key', d.idempotency_key], ['reason', d.abandoned_reason], ['attempts', d.attempt_count],
          ['error type', d.error_type], ['last error', d.last_error], ['job created', fmtTime(d.job_created_at)], ['failed', fmtTime(d.failed_at)]])),
        h('div', { class: 'card' }, h('h2', null, 'Original event'), json(d.original_event))),
      h('h2', null, 'Error history'),
      table(['attempt#', 'at', 'type', 'message'], (d.error_history || []).map((e) => h('tr', null, h('td', { class: 'num' }, e.attempt),
        h('td', null, fmtTime(e.at)), h('td', null, e.type), h('td', { class: 'wrap' }, e.message)))));
  }

  // Workflows.

  async function workflowsPage(view, r) {
    if (r.id) return workflowDetail(view, r.id, r.params);
    const p = r.params;
    add(view, h('h1', null, 'Workflows'), filterForm('workflows', p, [
      { name: 'name', label: 'name' },
      { name: 'status', label: 'status', options: ['running', 'completed', 'failed'] },
      { name: 'updated_before', label: 'updated before', placeholder: 'RFC 3339 or age: 1h' },
    ]));
    const res = await api('GET', '/api/admin/workflows' + query({ name: p.get('name'), status: p.get('status'), updated_before: p.get('updated_before'), after: p.get('after'), limit: PAGE_SIZE }));
    add(view, table(['id', 'name', 'state', 'status', 'version#', 'updated', 'error'], res.workflows.map((w) =>
      h('tr', { class: 'clickable', onclick: () => { location.hash = link('workflows', w.id); } },
        h('td', null, h('a', { href: link('workflows', w.id) }, w.id)), h('td', null, w.name), h('td', null, w.state),
        h('td', null, stateTag(w.status)), h('td', { class: 'num' }, w.version), h('td', null, fmtTime(w.updated_at)), h('td', { class: 'wrap' }, w.error || '')))),
    pager('workflows', p, 'after', res.next_after));
  }

  async function workflowDetail(view, id, p) {
    add(view, h('p', null, h('a', { href: '#/workflows' }, '← Workflows')));
    const res = await api('GET', '/api/admin/workflows/' + encodeURIComponent(id) + query({ after_version: p.get('after_version'), limit: 100 }));
    const w = res.workflow;
    const more = new URLSearchParams(p);
    if (res.next_after_version !== null) more.set('after_version', res.next_after_version);
    add(view, h('h1', null, `Workflow ${w.id} `, stateTag(w.status)),
      h('div', { class: 'grid' },
        h('div', { class: 'card' }, fields([['name', w.name], ['state', w.state], ['status', w.status], ['version', w.version], ['error', w.error],
          ['created', fmtTime(w.created_at)], ['updated', fmtTime(w.updated_at)]])),
        h('div', { class: 'card' }, h('h2', null, 'Data'), w.data !== undefined ? json(w.data) : h('pre', null, w.data_base64 ? '(binary, base64) ' + w.data_base64 : '(none)'))),
      h('h2', null, 'State history'),
      table(['version#', 'from', 'to', 'status', 'at', 'error'], res.history.map((t) => h('tr', null, h('td', { class: 'num' }, t.version),
        h('td', null, t.from_state), h('td', null, t.state), h('td', null, stateTag(t.status)), h('td', null, fmtTime(t.at)), h('td', { class: 'wrap' }, t.error || '')))),
      res.next_after_version !== null ? h('div', { class: 'pager' }, h('a', { href: link('workflows', w.id, more) }, 'later history →')) : null);
  }

  // Reindex.

  async function reindexPage(view) {
    const runs = h('div');
    add(view, h('h1', null, 'Reindex'),
      h('p', { class: 'muted' }, 'A reconciliation compares every saved document with the search index and repairs what is missing or stale.'),
      h('div', { class: 'toolbar' }, h('button', {
        type: 'button',
        id: 'reindex-start',
        class: 'primary',
        onclick: async () => {
          try {
            const out = await api('POST', '/api/admin/reindex');
            flash(out.outcome === 'inserted' ? `reindex enqueued as job ${out.job_id}` : `a reindex is already waiting or running: job ${out.job_id} (${out.outcome})`);
          } catch (e) {
            flash(e.message, true);
          }
          await show();
        },
      }, 'Start a reindex')), runs);
    const show = async () => {
      try {
        const res = await api('GET', '/api/admin/reindex?limit=10');
        fill(runs, table(['run#', 'trigger', 'status', 'started', 'progress', 'checked#', 'missing#', 'stale#', 'extra#', 'repaired#', 'error'],
          res.runs.map((run) => {
            const pct = run.total > 0 ? Math.min(100, (100 * run.checked) / run.total) : run.status === 'running' ? 0 : 100;
            const bar = h('div');
            bar.style.width = pct.toFixed(1) + '%';
            return h('tr', null, h('td', { class: 'num' }, run.id), h('td', null, run.trigger), h('td', null, stateTag(run.status)), h('td', null, fmtTime(run.started_at)),
              h('td', null, h('div', { class: 'progress', title: pct.toFixed(0) + '%' }, bar)), h('td', { class: 'num' }, run.checked + '/' + run.total),
              h('td', { class: 'num' }, run.missing), h('td', { class: 'num' }, run.stale), h('td', { class: 'num' }, run.extra), h('td', { class: 'num' }, run.repaired),
              h('td', { class: 'wrap' }, run.error || ''));
          })));
      } catch (e) {
        fill(runs, errorBox(e));
      }
    };
    await show();
    every(2000, show);
  }

  // Start.

  showAuth();
  window.addEventListener('hashchange', route);
  if (!location.hash) history.replaceState(null, '', '#/overview');
  route();
  sample().catch(() => {});
  setInterval(() => { sample().catch(() => {}); }, SAMPLE_EVERY);
})();
