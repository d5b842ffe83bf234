// A static file server for the built playground, bound to 127.0.0.1 only.
// Serves GET and HEAD of files under DIR (never outside it) with the types a
// browser needs for ES modules and WebAssembly; prints `http://127.0.0.1:PORT/`
// on its first line once listening. PORT 0 (the default) takes a free port.
//
// Usage: node web/serve.mjs [DIR] [PORT]   (DIR relative to the repository, default target/web)

import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const root = resolve(repo, process.argv[2] ?? 'target/web');
const port = Number(process.argv[3] ?? 0);

/** The file a request path names, or null when it is outside the root or not a file. */
function fileFor(urlPath) {
  let path;
  try {
    path = decodeURIComponent(new URL(urlPath, 'http://127.0.0.1').pathname);
  } catch {
    return null;
  }
  if (path.endsWith('/')) path += 'index.html';
  const file = resolve(join(root, path));
  if (file !== root && !file.startsWith(root + sep)) return null;
  try {
    return statSync(file).isFile() ? file : null;
  } catch {
    return null;
  }
}

const server = createServer((req, res) => {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  const file = fileFor(req.url ?? '/');
  if (file === null) {
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
    return;
  }
  res.writeHead(200, {
    'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
    'cache-control': 'no-store',
  });
  if (req.method === 'HEAD') res.end();
  else createReadStream(file).pipe(res);
});

server.listen(port, '127.0.0.1', () => {
  console.log(`http://127.0.0.1:${server.address().port}/`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
