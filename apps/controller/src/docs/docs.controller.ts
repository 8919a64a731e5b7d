import { Controller, Get, Header } from '@nestjs/common';
import { Public, RequireScope } from '../auth/scopes';
import { buildOpenApiDocument } from './openapi';

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Runledger API</title>
<style>body{font:14px system-ui,sans-serif;margin:2rem;max-width:70rem}code,pre{background:#f4f4f4;padding:.1rem .3rem}
.op{border:1px solid #ddd;border-radius:4px;margin:.5rem 0;padding:.5rem}.m{font-weight:bold;text-transform:uppercase;margin-right:.5rem}
pre{white-space:pre-wrap;max-height:20rem;overflow:auto}</style></head>
<body><h1>Runledger API</h1><p>Machine-readable document: <a href="/docs/openapi.json">/docs/openapi.json</a> (needs a bearer token, read from the dashboard's session).</p>
<div id="ops">Loading&hellip;</div>
<script type="module">
const token = sessionStorage.getItem('runledger.token') || prompt('Bearer token');
if (token) sessionStorage.setItem('runledger.token', token);
const res = await fetch('/docs/openapi.json', { headers: { Authorization: 'Bearer ' + token } });
const ops = document.getElementById('ops');
if (!res.ok) { ops.textContent = 'Could not load the document: HTTP ' + res.status; }
else {
  const doc = await res.json();
  ops.textContent = '';
  const p = document.createElement('p'); p.textContent = doc.info.description; ops.append(p);
  for (const [path, methods] of Object.entries(doc.paths)) for (const [m, op] of Object.entries(methods)) {
    const d = document.createElement('details'); d.className = 'op';
    const s = document.createElement('summary');
    s.innerHTML = '<span class="m"></span><code></code> <span></span>';
    s.children[0].textContent = m; s.children[1].textContent = path;
    s.children[2].textContent = op.summary + (op['x-required-scope'] ? ' [' + op['x-required-scope'] + ']' : '');
    const pre = document.createElement('pre'); pre.textContent = JSON.stringify(op, null, 2);
    d.append(s, pre); ops.append(d);
  }
}
</script></body></html>`;

@Controller('docs')
export class DocsController {
  private readonly document = buildOpenApiDocument();

  @Get()
  @Public()
  @Header('Content-Type', 'text/html; charset=utf-8')
  page(): string {
    return PAGE;
  }

  @Get('openapi.json')
  @RequireScope('tasks:read')
  openapi(): Record<string, unknown> {
    return this.document;
  }
}
