// A tiny static file server for the demo and the browser tests (Node's http module only).
// Usage: node scripts/serve.mjs [ROOT] [PORT]   (defaults: www, $PORT or 8080)
// localhost is a secure context, which navigator.gpu and navigator.ml require.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.safetensors': 'application/octet-stream',
  '.bin': 'application/octet-stream',
};

/** Starts serving `root`; resolves to the listening server (port 0 picks a free port). With
 * `isolated`, every response carries COOP same-origin and COEP require-corp, which make a page
 * cross-origin isolated (SharedArrayBuffer, the CPU backend's threads). */
export function serve(root, port = 0, host = '127.0.0.1', { isolated = false } = {}) {
  const base = path.resolve(root);
  const server = http.createServer((req, res) => {
    let rel;
    try {
      rel = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    } catch {
      res.writeHead(400).end('bad request');
      return;
    }
    let file = path.join(base, rel);
    // Refuse anything that escapes the root (../ after decoding).
    if (file !== base && !file.startsWith(base + path.sep)) {
      res.writeHead(403).end('forbidden');
      return;
    }
    fs.stat(file, (err, st) => {
      if (!err && st.isDirectory()) {
        file = path.join(file, 'index.html');
        st = fs.existsSync(file) ? fs.statSync(file) : null;
      }
      if (err || !st) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      // Test behaviours, as query parameters of any file (tests/browser/weights_download.mjs):
      // `ranges` says Accept-Ranges and answers `Range: bytes=N-` with a 206; `abort=N` closes
      // the connection after N bytes of a whole body; `pause=N` stops for a second after N bytes.
      const query = new URL(req.url, 'http://localhost').searchParams;
      const range = query.has('ranges') ? /^bytes=(\d+)-$/.exec(req.headers.range ?? '') : null;
      const start = range ? Number(range[1]) : 0;
      if (start >= st.size && range) {
        res.writeHead(416, { 'content-range': `bytes */${st.size}` }).end();
        return;
      }
      res.writeHead(range ? 206 : 200, {
        'content-type': MIME[path.extname(file).toLowerCase()] || 'application/octet-stream',
        'content-length': st.size - start,
        'cache-control': 'no-store',
        ...(isolated ? { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' } : {}),
        ...(query.has('ranges') ? { 'accept-ranges': 'bytes' } : {}),
        ...(range ? { 'content-range': `bytes ${start}-${st.size - 1}/${st.size}` } : {}),
      });
      if (req.method === 'HEAD') {
        res.end();
        return;
      }
      const stream = fs.createReadStream(file, { start });
      const abortAt = !range && query.has('abort') ? Number(query.get('abort')) : Infinity;
      const pauseAt = !range && query.has('pause') ? Number(query.get('pause')) : Infinity;
      if (abortAt === Infinity && pauseAt === Infinity) {
        stream.pipe(res);
        return;
      }
      let sent = 0;
      stream.on('data', (chunk) => {
        const at = sent;
        sent += chunk.length;
        if (sent >= abortAt) {
          stream.destroy();
          res.write(chunk.subarray(0, abortAt - at), () => res.destroy());
        } else if (at < pauseAt && sent >= pauseAt) {
          stream.pause();
          res.write(chunk.subarray(0, pauseAt - at));
          setTimeout(() => {
            res.write(chunk.subarray(pauseAt - at));
            stream.resume();
          }, 1000);
        } else {
          res.write(chunk);
        }
      });
      stream.on('end', () => res.end());
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const root = process.argv[2] || 'www';
  const port = Number(process.argv[3] || process.env.PORT || 8080);
  const server = await serve(root, port);
  console.log(`serving ${path.resolve(root)} at http://localhost:${server.address().port}/`);
}
