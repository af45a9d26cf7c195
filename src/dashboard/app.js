// The dashboard: a caller's view (API key) and an operator's view (admin token)
// over the gateway's own API. The key or token lives in one variable of this
// closure: never in localStorage, sessionStorage, a cookie or the URL, so a
// reload signs out and nothing outlives the tab. Every failed call is shown in
// words (status, the API's error message and code); nothing fails silently.
'use strict';

(function () {
  /** The bearer secret of the signed-in user; null when signed out. */
  let secret = null;
  /** 'caller' | 'operator' | null */
  let role = null;
  let countdown = null;
  let accountsAfter = null;
  let accountsCursor = null;
  const $ = (id) => document.getElementById(id);

  // ---- messages ----------------------------------------------------------
  function message(kind, text) {
    const p = document.createElement('p');
    p.className = kind;
    p.textContent = text;
    const close = document.createElement('button');
    close.type = 'button';
    close.textContent = 'Dismiss';
    close.className = 'link';
    close.addEventListener('click', () => p.remove());
    p.append(' ', close);
    $('messages').appendChild(p);
  }
  const showError = (text) => message('error', text);
  const showNotice = (text) => message('notice', text);
  const clearMessages = () => $('messages').replaceChildren();

  // ---- the API -----------------------------------------------------------
  class ApiError extends Error {
    constructor(status, text) {
      super(text);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const headers = { authorization: `Bearer ${secret}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
      });
    } catch (err) {
      throw new ApiError(0, `network failure, the gateway could not be reached (${err && err.message ? err.message : err})`);
    }
    const text = await res.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
    if (!res.ok) {
      const e = json && json.error;
      const why = e && e.message ? e.message : (text.slice(0, 200) || 'no error message');
      throw new ApiError(res.status, `HTTP ${res.status}: ${why}${e && e.code ? ` (${e.code})` : ''}`);
    }
    if (json === null) throw new ApiError(res.status, `HTTP ${res.status} with a body that is not JSON`);
    return json;
  }

  /** Runs one action; its failure becomes a message that names the action. */
  async function guarded(what, action) {
    try {
      return await action();
    } catch (err) {
      showError(`${what} failed: ${err && err.message ? err.message : String(err)}`);
      return undefined;
    }
  }

  // ---- formatting --------------------------------------------------------
  const num = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : '—');
  const when = (iso) => (iso ? iso.replace('T', ' ').replace(/:\d\dZ$/, 'Z') : '—');
  const utcDay = (ms) => new Date(ms).toISOString().slice(0, 10);

  function cell(row, content, className) {
    const td = document.createElement('td');
    if (content instanceof Node) td.appendChild(content);
    else td.textContent = content === null || content === undefined ? '—' : String(content);
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function button(label, onClick, className) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    if (className) b.className = className;
    b.addEventListener('click', onClick);
    return b;
  }

  function fillTable(table, items, columns, emptyText) {
    const body = table.tBodies[0];
    body.replaceChildren();
    if (items.length === 0) {
      const row = body.insertRow();
      const td = cell(row, emptyText, 'muted');
      td.colSpan = table.tHead.rows[0].cells.length;
      return;
    }
    for (const item of items) {
      const row = body.insertRow();
      row.className = 'data-row';
      for (const column of columns) cell(row, column(item));
    }
  }

  function dl(target, pairs) {
    target.replaceChildren();
    for (const [term, value, id] of pairs) {
      const dt = document.createElement('dt');
      dt.textContent = term;
      const dd = document.createElement('dd');
      dd.textContent = value;
      if (id) dd.id = id;
      const group = document.createElement('div');
      group.append(dt, dd);
      target.append(group);
    }
  }

  function remaining(ms) {
    if (ms <= 0) return 'expired';
    const s = Math.floor(ms / 1000);
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    return `${d}d ${h}h ${String(m).padStart(2, '0')}m ${String(s % 60).padStart(2, '0')}s left`;
  }

  // ---- caller view -------------------------------------------------------
  async function loadCredits() {
    const c = await api('GET', '/v1/credits');
    const earned = c.earned_credits || {};
    dl($('credits'), [
      ['Available', num(c.available_credits), 'available-credits'],
      ['Earned', num(earned.balance), 'earned-credits'],
      ['Earned credits expire', earned.expires_at ? when(earned.expires_at) : 'none pending', null],
      ['Time left', earned.expires_at ? remaining(Date.parse(earned.expires_at) - Date.now()) : '—', 'earned-countdown'],
      ['Purchased', num(c.purchased_credits && c.purchased_credits.balance), 'purchased-credits'],
      ['Reserved', num(c.reserved_credits), 'reserved-credits'],
      ['Total', num(c.total_credits), 'total-credits'],
    ]);
    clearInterval(countdown);
    if (earned.expires_at) {
      const at = Date.parse(earned.expires_at);
      countdown = setInterval(() => {
        const node = $('earned-countdown');
        if (node) node.textContent = remaining(at - Date.now());
      }, 1000);
    }
  }

  async function loadUsage() {
    const days = Number($('period').value);
    const end = Date.now();
    const start = end - (days - 1) * 86_400_000;
    const u = await api('GET', `/v1/usage?start_date=${utcDay(start)}&end_date=${utcDay(end)}`);
    const labels = [];
    for (let t = Date.parse(`${utcDay(start)}T00:00:00Z`); labels.length < days; t += 86_400_000) labels.push(utcDay(t));
    const models = [...new Set(u.daily.map((d) => d.model))].sort();
    const series = (field) => models.map((model) => ({
      name: model,
      values: labels.map((day) => u.daily.filter((d) => d.date === day && d.model === model).reduce((s, d) => s + d[field], 0)),
    }));
    $('usage-summary').textContent =
      `${num(u.total_requests)} requests, ${num(u.total_credits_spent)} credits, ${num(u.total_prompt_tokens)} prompt and ` +
      `${num(u.total_completion_tokens)} completion tokens from ${u.period_start.slice(0, 10)} to ${u.period_end.slice(0, 10)} (UTC days).`;
    window.SvcChart.stackedBars($('credits-chart'), { labels, series: series('credits'), label: 'Credits by day and model', emptyMessage: 'No usage in this period.' });
    window.SvcChart.stackedBars($('requests-chart'), { labels, series: series('requests'), label: 'Requests by day and model', emptyMessage: 'No usage in this period.' });
  }

  async function loadKeys() {
    const list = await api('GET', '/v1/api-keys');
    fillTable($('keys'), list.data, [
      (k) => k.name || '(unnamed)', (k) => k.redacted_key, (k) => k.environment,
      (k) => (k.daily_credit_limit === null ? 'none' : num(k.daily_credit_limit)), (k) => num(k.credits_spent_today),
      (k) => when(k.created_at), (k) => when(k.last_used_at),
      (k) => button('Revoke', () => revoke(k), 'danger'),
    ], 'No active keys.');
  }

  function confirmDialog(text, okLabel) {
    const dialog = $('confirm');
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = okLabel;
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.returnValue = 'cancel';
      dialog.showModal();
    });
  }

  /** Whether a redacted key (`svc_live_…9fQa`) is the one this page signed in with. */
  function isSignedInKey(redacted) {
    const [prefix, last] = String(redacted).split('…');
    return Boolean(secret && prefix && last && secret.startsWith(prefix) && secret.endsWith(last));
  }

  async function revoke(key) {
    const label = `${key.name || '(unnamed)'} ${key.redacted_key}`;
    if (!(await confirmDialog(`Revoke the key ${label}? Requests with it are refused from now on; this cannot be undone.`, 'Revoke'))) return;
    const signedInWith = isSignedInKey(key.redacted_key);
    const done = await guarded(`Revoking ${label}`, () => api('DELETE', `/v1/api-keys/${encodeURIComponent(key.id)}`));
    if (!done) return;
    if (signedInWith) {
      signOut();
      showNotice(`Key ${label} revoked. It was the key you signed in with, so you are signed out.`);
      return;
    }
    showNotice(`Key ${label} revoked.`);
    await guarded('Loading the keys', loadKeys);
  }

  async function createKey(event) {
    event.preventDefault();
    const body = { environment: $('new-key-env').value };
    const name = $('new-key-name').value.trim();
    if (name) body.name = name;
    const cap = $('new-key-cap').value.trim();
    if (cap !== '') body.daily_credit_limit = Number(cap);
    const created = await guarded('Creating the key', () => api('POST', '/v1/api-keys', body));
    if (!created) return;
    $('create-key').reset();
    $('new-secret-value').textContent = created.key;
    $('copy-status').textContent = '';
    $('new-secret').hidden = false;
    await guarded('Loading the keys', loadKeys);
  }

  async function copySecret() {
    const value = $('new-secret-value').textContent;
    try {
      await navigator.clipboard.writeText(value);
      $('copy-status').textContent = 'Copied.';
    } catch (err) {
      const range = document.createRange();
      range.selectNodeContents($('new-secret-value'));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      $('copy-status').textContent = `The browser refused the clipboard (${err && err.message ? err.message : err}); the key is selected: copy it with Ctrl+C.`;
    }
  }

  function hideSecret() {
    $('new-secret-value').textContent = '';
    $('new-secret').hidden = true;
  }

  async function loadCaller() {
    await Promise.all([
      guarded('Loading the credits', loadCredits), guarded('Loading the usage', loadUsage), guarded('Loading the keys', loadKeys),
    ]);
  }

  // ---- operator view -----------------------------------------------------
  async function loadAccounts(after) {
    const query = after ? `?limit=20&after=${encodeURIComponent(after)}` : '?limit=20';
    const page = await api('GET', `/admin/v1/accounts${query}`);
    accountsCursor = after;
    accountsAfter = page.has_more && page.data.length > 0 ? page.data[page.data.length - 1].id : null;
    $('accounts-next').disabled = accountsAfter === null;
    const credits = (a) => a.credits || {};
    fillTable($('accounts'), page.data, [
      (a) => a.id, (a) => a.name, (a) => when(a.created_at),
      (a) => num(credits(a).earned_credits && credits(a).earned_credits.balance),
      (a) => num(credits(a).purchased_credits && credits(a).purchased_credits.balance),
      (a) => num(credits(a).reserved_credits), (a) => num(credits(a).available_credits),
      (a) => button('Grant…', () => {
        $('grant-account').value = a.id;
        $('grant-amount').focus();
      }),
    ], 'No accounts.');
  }

  async function loadUpstreams() {
    const list = await api('GET', '/admin/v1/upstreams');
    const ms = (v) => (v === null || v === undefined ? '—' : `${num(v)} ms`);
    fillTable($('upstreams'), list.data, [
      (u) => u.upstream,
      (u) => (u.state === 'open' ? `open until ${when(u.open_until)}` : u.state),
      (u) => num(u.consecutive_failures), (u) => num(u.recent_attempts),
      (u) => (u.recent_error_rate === null || u.recent_error_rate === undefined ? '—' : `${(u.recent_error_rate * 100).toFixed(1)} %`),
      (u) => ms(u.latency_p50_ms), (u) => ms(u.latency_p95_ms), (u) => u.last_error,
    ], 'No upstream is configured.');
    for (const row of $('upstreams').tBodies[0].rows) {
      if (row.cells[1] && row.cells[1].textContent.startsWith('open')) row.cells[1].className = 'bad';
    }
  }

  async function loadTraffic() {
    const t = await api('GET', '/admin/v1/traffic');
    const start = Date.parse(t.start);
    const labels = Array.from({ length: t.minutes }, (_, i) => new Date(start + i * 60_000).toISOString().slice(11, 16));
    const series = Object.entries(t.by_alias).map(([name, values]) => ({ name, values }));
    window.SvcChart.lines($('traffic-chart'), { labels, series, label: 'Requests per minute by alias', emptyMessage: 'No requests in the last hour.' });
  }

  async function grant(event) {
    event.preventDefault();
    const account = $('grant-account').value.trim();
    const body = { kind: $('grant-kind').value, amount: Number($('grant-amount').value) };
    if (body.kind === 'earned') {
      const local = $('grant-expires').value;
      if (!local) return showError('Granting failed: earned credits need an expiry date.');
      body.expires_at = `${local.length === 16 ? `${local}:00` : local}Z`;
    }
    const done = await guarded(`Granting credits to ${account}`, () => api('POST', `/admin/v1/accounts/${encodeURIComponent(account)}/grants`, body));
    if (!done) return;
    $('grant-result').textContent =
      `Granted ${num(done.amount)} ${done.kind} credits to ${done.account_id}${done.expires_at ? `, expiring ${when(done.expires_at)}` : ''} (${done.id}).`;
    await guarded('Loading the accounts', () => loadAccounts(accountsCursor));
  }

  async function loadOperator() {
    await Promise.all([
      guarded('Loading the accounts', () => loadAccounts(accountsCursor)), guarded('Loading the upstreams', loadUpstreams),
      guarded('Loading the traffic', loadTraffic),
    ]);
  }

  // ---- signing in and out ------------------------------------------------
  function show(which) {
    role = which;
    $('sign-in').hidden = which !== null;
    $('caller').hidden = which !== 'caller';
    $('operator').hidden = which !== 'operator';
    $('refresh').hidden = which === null;
    $('sign-out').hidden = which === null;
    $('who').textContent = which === 'caller' ? 'signed in with an API key' : which === 'operator' ? 'signed in as operator' : '';
  }

  function signOut() {
    secret = null;
    clearInterval(countdown);
    hideSecret();
    for (const id of ['credits', 'usage-summary', 'credits-chart', 'requests-chart', 'traffic-chart', 'grant-result']) $(id).replaceChildren();
    for (const id of ['keys', 'accounts', 'upstreams']) $(id).tBodies[0].replaceChildren();
    accountsAfter = null;
    accountsCursor = null;
    show(null);
  }

  async function signIn(event, which, input, probe, load) {
    event.preventDefault();
    clearMessages();
    secret = $(input).value.trim();
    $(input).value = '';
    try {
      await probe();
    } catch (err) {
      secret = null;
      const why = err.status === 404 && which === 'operator' ? 'the admin API is not enabled on this gateway (SVC_ADMIN_TOKEN is not set)' : err.message;
      showError(`Sign-in refused: ${why}`);
      return;
    }
    show(which);
    await load();
  }

  function refresh() {
    clearMessages();
    return role === 'caller' ? loadCaller() : role === 'operator' ? loadOperator() : undefined;
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('caller-sign-in').addEventListener('submit', (e) => signIn(e, 'caller', 'caller-key', () => api('GET', '/v1/credits'), loadCaller));
    $('operator-sign-in').addEventListener('submit', (e) => signIn(e, 'operator', 'admin-token', () => api('GET', '/admin/v1/accounts?limit=1'), loadOperator));
    $('sign-out').addEventListener('click', signOut);
    $('refresh').addEventListener('click', refresh);
    $('period').addEventListener('change', () => guarded('Loading the usage', loadUsage));
    $('create-key').addEventListener('submit', createKey);
    $('copy-secret').addEventListener('click', copySecret);
    $('hide-secret').addEventListener('click', hideSecret);
    $('grant').addEventListener('submit', grant);
    $('grant-kind').addEventListener('change', () => {
      $('grant-expiry-label').hidden = $('grant-kind').value !== 'earned';
    });
    $('accounts-first').addEventListener('click', () => guarded('Loading the accounts', () => loadAccounts(null)));
    $('accounts-next').addEventListener('click', () => guarded('Loading the accounts', () => loadAccounts(accountsAfter)));
    window.addEventListener('unhandledrejection', (e) => showError(`Unexpected failure: ${e.reason && e.reason.message ? e.reason.message : e.reason}`));
    window.addEventListener('error', (e) => showError(`Unexpected failure: ${e.message}`));
    show(null);
  });
})();
