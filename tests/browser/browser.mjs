// Shared by the browser tests: the repository served on localhost (a secure context) and
// headless Chromium with WebGPU on SwiftShader. Playwright never downloads a browser here.
import { chromium } from 'playwright-core';
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { serve } from '../../scripts/serve.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const CHROMIUM_ARGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu-sandbox',
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** Serves `root` (default: the repository) and launches Chromium with `CHROMIUM_ARGS` and
 * `extraArgs`; `close()` stops both. With WEBNN_THREADS set, pages are cross-origin isolated. */
export async function start(root = ROOT, extraArgs = []) {
  const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
  if (!fs.existsSync(executablePath)) throw new Error(`${executablePath} is missing: run scripts/setup.sh`);
  const server = await serve(root, 0, '127.0.0.1', { isolated: Boolean(process.env.WEBNN_THREADS) });
  const browser = await chromium.launch({ executablePath, args: [...CHROMIUM_ARGS, ...extraArgs], headless: true });
  const url = `http://localhost:${server.address().port}`;
  const close = async () => {
    await browser.close().catch(() => {});
    server.close();
  };
  return { browser, server, url, close };
}

/** Opens `url` in a new page of `browser` (a Browser, or a BrowserContext to share its storage)
 * whose console errors and crashes are logged with `tag`. */
export async function openPage(browser, url, tag = 'page') {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error(`[${tag}] page error: ${e.message}`));
  page.on('crash', () => console.error(`[${tag}] page crashed`));
  await page.goto(url);
  return page;
}

/** Waits until the harness page (tests/browser/harness.html) has loaded and is ready. */
export async function harnessReady(page) {
  await page.waitForFunction(() => window.harness !== undefined, null, { timeout: 60000 });
  await page.evaluate(() => window.harness.ready);
  return page;
}

/** The harness page's URL under `url`: its contexts run on the backend WEBNN_BACKEND names
 * (`webgpu`, the default, or `cpu`), the CPU backend on WEBNN_THREADS threads when set. */
export function harnessUrl(url) {
  const threads = process.env.WEBNN_THREADS ? `&threads=${process.env.WEBNN_THREADS}` : '';
  return `${url}/tests/browser/harness.html?backend=${process.env.WEBNN_BACKEND || 'webgpu'}${threads}`;
}

/** Opens the harness page in a new page of `browser` (see `openPage`) and waits until it is ready. */
export async function openHarness(browser, url, tag) {
  return harnessReady(await openPage(browser, harnessUrl(url), tag));
}

/** `promise`, or a rejection naming `what` once `ms` milliseconds have passed. */
export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

export function writeOut(name, data) {
  const dir = path.join(ROOT, 'out');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  fs.writeFileSync(file, typeof data === 'string' ? data : JSON.stringify(data, null, 2));
  return file;
}
