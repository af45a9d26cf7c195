/**
 * The dashboard end to end in headless Chromium (Debian's, driven by
 * playwright-core): a caller signs in with a key, sees the balance move after a
 * completion, creates and revokes a key; a wrong key is refused in words; the
 * operator sees accounts, grants credits, and sees upstream health and traffic.
 * Each view is written to test/artifacts/ and checked to have drawn its charts
 * and filled its tables.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { startGateway, type TestAccount, type TestGateway } from '../support/gateway.js';
import { call, credits } from '../support/e2e.js';
import { browserSkipReason, chartFacts, openBrowser, type BrowserSession } from '../support/browser.js';

const ADMIN = 'admin-token-dashboard-browser-0123';
const DAY = 86_400_000;
const skip = browserSkipReason();
const fmt = (n: number) => n.toLocaleString('en-US');

describe('the dashboard in headless Chromium', { skip }, () => {
  let gw: TestGateway;
  let session: BrowserSession;
  let page: Page;
  let caller: TestAccount;

  before(async () => {
    gw = await startGateway({ adminToken: ADMIN });
    caller = await gw.createAccount({
      name: 'Caller Ltd', purchased: 5_000, earned: [{ amount: 1_000, expiresAt: new Date(Date.now() + 10 * DAY) }], key: { name: 'primary' },
    });
    // Usage to chart, and more accounts than one page of the operator's table holds.
    for (const model of ['svc-fast', 'svc-code', 'svc-fast']) await complete(caller.key, model);
    for (let n = 0; n < 21; n++) await gw.createAccount({ name: `filler ${n}`, purchased: n + 1 });
    session = await openBrowser(gw.origin);
    page = session.page;
    await page.goto(`${gw.origin}/dashboard`);
  });
  after(async () => {
    await session?.browser.close();
    await gw?.close();
  });

  async function complete(key: string, model: string): Promise<void> {
    await gw.client(key).chat.completions.create({ model, messages: [{ role: 'user', content: `Hello from the dashboard test, ${model}` }] });
  }
  const text = (selector: string) => page.locator(selector).innerText();
  const rows = (table: string) => page.locator(`#${table} tbody tr.data-row`);
  async function waitForText(selector: string, expected: string): Promise<void> {
    await page.waitForFunction(([sel, want]) => document.querySelector(sel!)?.textContent === want, [selector, expected]);
  }
  async function signIn(form: 'caller' | 'operator', secret: string): Promise<void> {
    await page.fill(form === 'caller' ? '#caller-key' : '#admin-token', secret);
    await page.click(`#${form}-sign-in button[type=submit]`);
  }

  it('signs a caller in and shows the balance, the usage charts and the keys', async () => {
    await signIn('caller', caller.key);
    await page.locator('#caller').waitFor({ state: 'visible' });
    const balance = await credits(gw, caller.key);
    await waitForText('#available-credits', fmt(balance.available_credits));
    assert.equal(await text('#earned-credits'), fmt(balance.earned_credits.balance));
    assert.equal(await text('#purchased-credits'), fmt(balance.purchased_credits.balance));
    assert.equal(await text('#reserved-credits'), '0');
    assert.match(await text('#earned-countdown'), /^(9|10)d \d+h \d\dm \d\ds left$/);
    assert.equal(await page.inputValue('#caller-key'), '', 'the key leaves the input once used');

    await page.waitForSelector('#requests-chart svg rect.bar');
    for (const chart of ['#credits-chart', '#requests-chart']) {
      const facts = await chartFacts(page, chart);
      assert.ok(facts && facts.width > 0 && facts.height > 0, `${chart}: ${JSON.stringify(facts)}`);
      // Today's bar stacks two models, svc-code and svc-fast (two days' bars if the run straddles midnight UTC).
      assert.ok(facts.bars >= 2, chart);
      assert.equal(facts.drawn, facts.bars);
    }
    assert.match(await text('#usage-summary'), /^3 requests, /);
    const summary30 = await text('#usage-summary');
    await page.selectOption('#period', '7');
    await page.waitForFunction((was) => document.querySelector('#usage-summary')?.textContent !== was, summary30);
    assert.match(await text('#usage-summary'), /^3 requests, /);
    assert.ok(((await chartFacts(page, '#credits-chart'))?.bars ?? 0) >= 2);
    assert.equal(await rows('keys').count(), 1);
    assert.match(await rows('keys').first().innerText(), /primary\s+svc_live_…/);
    await session.screenshot('caller');

    // Nothing of the key in storage, cookies or the URL.
    const traces = await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie, location.href]);
    assert.deepEqual(traces, [0, 0, '', `${gw.origin}/dashboard`]);
  });

  it('shows the balance change after a completion and a refresh', async () => {
    const before = await text('#available-credits');
    await complete(caller.key, 'svc-smart');
    const balance = await credits(gw, caller.key);
    assert.notEqual(fmt(balance.available_credits), before);
    await page.click('#refresh');
    await waitForText('#available-credits', fmt(balance.available_credits));
    assert.match(await text('#usage-summary'), /^4 requests, /);

    // A network failure is shown in words too.
    await page.route('**/v1/usage?*', (route) => route.abort('connectionrefused'));
    await page.selectOption('#period', '90');
    await page.waitForFunction(() => /Loading the usage failed: network failure, the gateway could not be reached/
      .test(document.querySelector('#messages')?.textContent ?? ''));
    await page.unroute('**/v1/usage?*');
  });

  it('creates a key, shows its secret once with a copy button, and revokes it after a confirmation', async () => {
    await page.fill('#new-key-name', 'ci-key');
    await page.selectOption('#new-key-env', 'test');
    await page.fill('#new-key-cap', '100');
    await page.click('#create-key button[type=submit]');
    await page.locator('#new-secret').waitFor({ state: 'visible' });
    const secret = await text('#new-secret-value');
    assert.match(secret, /^svc_test_\w{20,}$/);
    assert.equal((await call(gw, 'GET', '/v1/credits', { key: secret })).status, 200, 'the secret shown works');
    await page.click('#copy-secret');
    await waitForText('#copy-status', 'Copied.');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
    await page.waitForFunction(() => document.querySelectorAll('#keys tbody tr.data-row').length === 2);
    const row = rows('keys').filter({ hasText: 'ci-key' });
    assert.match(await row.innerText(), /ci-key\s+svc_test_…\S{4}\s+test\s+100\s+0/);
    await session.screenshot('caller-new-key');
    await page.click('#hide-secret');
    assert.equal(await page.locator('#new-secret').isHidden(), true);
    assert.equal(await page.locator('#new-secret-value').textContent(), '', 'the secret is gone from the page');

    // Cancel keeps the key; confirming revokes it.
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.locator('#confirm').waitFor({ state: 'visible' });
    assert.match(await text('#confirm-text'), /Revoke the key ci-key svc_test_…/);
    await page.click('#confirm button[value=cancel]');
    assert.equal(await rows('keys').count(), 2);
    assert.equal((await call(gw, 'GET', '/v1/credits', { key: secret })).status, 200);
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.click('#confirm-ok');
    await page.waitForFunction(() => document.querySelectorAll('#keys tbody tr.data-row').length === 1);
    assert.match(await text('#messages'), /Key ci-key svc_test_…\S{4} revoked\./);
    const refused = await call(gw, 'GET', '/v1/credits', { key: secret });
    assert.equal(refused.status, 401);
  });

  it('refuses a wrong key with a visible message, and shows a failed call in words', async () => {
    await page.click('#sign-out');
    await page.locator('#sign-in').waitFor({ state: 'visible' });
    assert.equal(await page.locator('#credits').innerText(), '', 'signing out clears what was shown');
    await signIn('caller', 'svc_live_notarealkey000000000000000000');
    await page.locator('#messages .error').waitFor({ state: 'visible' });
    assert.match(await text('#messages .error'), /^Sign-in refused: HTTP 401: .+ \(invalid_api_key\)/);
    assert.equal(await page.locator('#caller').isHidden(), true);
    await session.screenshot('sign-in-refused');

    await signIn('operator', 'not-the-admin-token');
    await page.waitForFunction(() => document.querySelectorAll('#messages .error').length === 1
      && /Invalid admin token/.test(document.querySelector('#messages .error')!.textContent ?? ''));
    assert.equal(await page.locator('#operator').isHidden(), true);
  });

  it('signs out a caller who revokes the very key they signed in with', async () => {
    const created = await call(gw, 'POST', '/v1/api-keys', { key: caller.key, body: { name: 'self', daily_credit_limit: 50 } });
    assert.equal(created.status, 201, created.text);
    const own = (created.json as { key: string }).key;
    await signIn('caller', own);
    await page.locator('#caller').waitFor({ state: 'visible' });
    await page.waitForFunction(() => document.querySelectorAll('#keys tbody tr.data-row').length === 2);
    await rows('keys').filter({ hasText: 'self' }).getByRole('button', { name: 'Revoke' }).click();
    await page.click('#confirm-ok');
    await page.locator('#sign-in').waitFor({ state: 'visible' });
    assert.match(await text('#messages .notice'), /It was the key you signed in with, so you are signed out\./);
    assert.equal(await page.locator('#keys tbody tr').count(), 0);
    assert.equal((await call(gw, 'GET', '/v1/credits', { key: own })).status, 401);
  });

  it('lets the operator page through accounts, grant credits and see the balance change', async () => {
    await signIn('operator', ADMIN);
    await page.locator('#operator').waitFor({ state: 'visible' });
    await page.waitForFunction(() => document.querySelectorAll('#accounts tbody tr.data-row').length === 20);
    assert.equal(await page.locator('#accounts-next').isEnabled(), true, '22 accounts: a second page');
    const firstPage = await rows('accounts').allInnerTexts();
    await page.click('#accounts-next');
    await page.waitForFunction(() => document.querySelectorAll('#accounts tbody tr.data-row').length === 2);
    const secondPage = await rows('accounts').allInnerTexts();
    assert.equal(new Set([...firstPage, ...secondPage].map((r) => r.split('\t')[0])).size, 22, 'the pages do not overlap');
    assert.equal(await page.locator('#accounts-next').isDisabled(), true);
    if (!secondPage.some((r) => r.includes(caller.accountId))) await page.click('#accounts-first');
    const row = rows('accounts').filter({ hasText: caller.accountId });
    await row.waitFor();
    const purchased = (await credits(gw, caller.key)).purchased_credits.balance;
    assert.match(await row.innerText(), new RegExp(`Caller Ltd\\s.*\\s${fmt(purchased)}\\s`));

    await row.getByRole('button', { name: 'Grant…' }).click();
    assert.equal(await page.inputValue('#grant-account'), caller.accountId);
    await page.fill('#grant-amount', '2500');
    await page.click('#grant button[type=submit]');
    await page.waitForFunction(() => /^Granted 2,500 purchased credits/.test(document.querySelector('#grant-result')?.textContent ?? ''));
    const granted = fmt(purchased + 2_500);
    await page.waitForFunction(([id, want]) => [...document.querySelectorAll('#accounts tbody tr')]
      .some((r) => r.textContent?.includes(id!) && r.children[4]?.textContent === want), [caller.accountId, granted]);
    assert.equal((await credits(gw, caller.key)).purchased_credits.balance, purchased + 2_500);

    await page.selectOption('#grant-kind', 'earned');
    await page.locator('#grant-expires').waitFor({ state: 'visible' });
    await page.fill('#grant-expires', '2031-01-01T00:00');
    await page.fill('#grant-amount', '300');
    await page.click('#grant button[type=submit]');
    await page.waitForFunction(() => /^Granted 300 earned credits .*expiring 2031-01-01 00:00Z/.test(document.querySelector('#grant-result')?.textContent ?? ''));

    await page.fill('#grant-account', 'acct_doesnotexist');
    await page.click('#grant button[type=submit]');
    await page.waitForFunction(() => /Granting credits to acct_doesnotexist failed: HTTP 404: /.test(document.querySelector('#messages')?.textContent ?? ''));
  });

  it('shows the operator each upstream\'s health and the requests per minute by alias', async () => {
    await page.click('#refresh');
    await page.waitForSelector('#traffic-chart svg path.line');
    const upstreams = await rows('upstreams').allInnerTexts();
    assert.equal(upstreams.length, 3, upstreams.join('\n'));
    const served = upstreams.find((r) => /\tclosed\t0\t[1-9]\d*\t0\.0 %\t\d+ ms\t\d+ ms\t/.test(r));
    assert.ok(served, `an upstream that served: ${upstreams.join('\n')}`);

    const traffic = await chartFacts(page, '#traffic-chart');
    assert.ok(traffic && traffic.width > 0 && traffic.height > 0, JSON.stringify(traffic));
    // svc-fast, svc-code, svc-smart have had requests within the hour: one line each, with points above zero.
    assert.equal(traffic.lines, 3);
    assert.ok(traffic.drawn >= 3, JSON.stringify(traffic));
    assert.deepEqual((await page.locator('#traffic-chart .legend li').allInnerTexts()).map((l) => l.trim()), ['svc-code', 'svc-fast', 'svc-smart']);
    await session.screenshot('operator');
  });

  it('loaded nothing from any other host and broke no CSP rule', () => {
    assert.deepEqual(session.foreignRequests, []);
    assert.deepEqual(session.pageProblems, []);
  });
});
