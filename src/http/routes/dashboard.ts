/**
 * GET /dashboard: the caller's and the operator's pages, served by the gateway
 * itself from `src/dashboard/` (plain HTML, CSS and JS; found from the package
 * root, so `dist/` and `src/` runs both serve them). Nothing is loaded from any
 * other host, and the Content-Security-Policy says so. The page asks for
 * `app.js?v=<hash>`: versioned assets are cached for a year, the page itself
 * is revalidated on every load.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { errors } from '../../errors.js';
import { allowOnly } from '../errors.js';

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};
const ASSETS = ['app.css', 'chart.js', 'app.js'] as const;

export const DASHBOARD_CSP = [
  "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
  "object-src 'none'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
].join('; ');

interface Asset {
  body: Buffer;
  type: string;
  version: string;
}

/** The package root: the nearest folder above this module that holds package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('svc-gateway: package.json not found above the dashboard module');
    dir = parent;
  }
  return dir;
}

function loadAssets(): { page: Buffer; assets: Map<string, Asset> } {
  const folder = join(packageRoot(), 'src', 'dashboard');
  const assets = new Map<string, Asset>();
  for (const name of ASSETS) {
    const body = readFileSync(join(folder, name));
    const version = createHash('sha256').update(body).digest('hex').slice(0, 12);
    assets.set(name, { body, type: CONTENT_TYPES[name.slice(name.lastIndexOf('.'))]!, version });
  }
  // The page names each asset as `{{name}}`; it is served with the asset's version in the URL.
  const page = readFileSync(join(folder, 'index.html'), 'utf8')
    .replace(/\{\{([\w.-]+)\}\}/g, (_, name: string) => `/dashboard/${name}?v=${assets.get(name)?.version ?? 'missing'}`);
  return { page: Buffer.from(page), assets };
}

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', DASHBOARD_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY');
}

export function dashboardRoutes(app: FastifyInstance): void {
  const { page, assets } = loadAssets();

  allowOnly(app, '/dashboard', ['GET']);
  app.get('/dashboard', async (_request, reply) => {
    return secure(reply).header('cache-control', 'no-cache').type(CONTENT_TYPES['.html']!).send(page);
  });

  app.get('/dashboard/', async (_request, reply) => reply.redirect('/dashboard', 308));

  allowOnly(app, '/dashboard/:file', ['GET']);
  app.get<{ Params: { file: string }; Querystring: { v?: string } }>('/dashboard/:file', async (request, reply) => {
    const asset = assets.get(request.params.file);
    if (!asset) throw errors.notFound();
    const versioned = request.query.v === asset.version;
    return secure(reply)
      .header('cache-control', versioned ? 'public, max-age=31536000, immutable' : 'no-cache')
      .header('etag', `"${asset.version}"`)
      .type(asset.type)
      .send(asset.body);
  });
}
