/**
 * Debian's Chromium driven by playwright-core (which never downloads a browser),
 * for the dashboard's end-to-end test. Where /usr/bin/chromium is missing the
 * test is skipped, and says so on the console.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** Why the browser tests cannot run here, or false when they can. */
export function browserSkipReason(): string | false {
  if (existsSync(CHROMIUM)) return false;
  const reason = `${CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium) to run the dashboard browser test`;
  console.log(`NOTICE: skipping the dashboard browser test: ${reason}`);
  return reason;
}

/** test/artifacts/, gitignored: the screenshots each run writes. */
export const ARTIFACTS = join(dirname(fileURLToPath(import.meta.url)), '..', 'artifacts');

export interface BrowserSession {
  browser: Browser;
  page: Page;
  /** Requests the page made to any origin other than the gateway's. */
  foreignRequests: string[];
  /** Uncaught page errors and Content-Security-Policy violations. */
  pageProblems: string[];
  screenshot(name: string): Promise<string>;
}

export async function openBrowser(origin: string): Promise<BrowserSession> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const foreignRequests: string[] = [];
  const pageProblems: string[] = [];
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(`${origin}/`) && !url.startsWith('data:')) foreignRequests.push(url);
  });
  page.on('pageerror', (error) => pageProblems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) pageProblems.push(`CSP: ${message.text()}`);
  });
  mkdirSync(ARTIFACTS, { recursive: true });
  return {
    browser, page, foreignRequests, pageProblems,
    async screenshot(name) {
      const path = join(ARTIFACTS, `${name}.png`);
      await page.screenshot({ path, fullPage: true });
      return path;
    },
  };
}

export interface ChartFacts {
  width: number;
  height: number;
  /** Bars or lines drawn with data (the chart's own count, checked against its elements). */
  drawn: number;
  bars: number;
  lines: number;
}

/** What a chart container holds: its SVG's size on the page and what it drew. */
export async function chartFacts(page: Page, selector: string): Promise<ChartFacts | null> {
  return page.evaluate((sel) => {
    const svg = document.querySelector(`${sel} svg.chart-svg`);
    if (!(svg instanceof SVGSVGElement)) return null;
    const box = svg.getBoundingClientRect();
    return {
      width: box.width, height: box.height, drawn: Number(svg.dataset.drawn ?? 0),
      bars: svg.querySelectorAll('rect.bar').length, lines: svg.querySelectorAll('path.line').length,
    };
  }, selector);
}
