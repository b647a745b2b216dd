// Validates an AsyncAPI document with the AsyncAPI project's own parser
// (@asyncapi/parser: the specification's JSON Schema and its Spectral
// rules). Errors fail; warnings are printed and fail too, so the document
// stays clean.
import { readFile } from 'node:fs/promises';
import { Parser, DiagnosticSeverity } from '@asyncapi/parser';

const file = process.argv[2];
if (!file) {
  console.error('usage: node check.mjs FILE');
  process.exit(2);
}
const parser = new Parser();
const { document, diagnostics } = await parser.parse(await readFile(file, 'utf8'), { source: file });
const names = Object.fromEntries(Object.entries(DiagnosticSeverity).map(([k, v]) => [v, k]));
let bad = 0;
for (const d of diagnostics) {
  const severity = names[d.severity] ?? d.severity;
  if (d.severity <= DiagnosticSeverity.Warning) bad++;
  console.log(`${file}: ${severity}: ${d.code}: ${d.message} at /${d.path.join('/')}`);
}
if (!document || bad > 0) {
  console.error(`${file}: not valid (${bad} errors or warnings)`);
  process.exit(1);
}
const messages = document.allMessages().length;
const channels = document.allChannels().length;
console.log(`${file}: valid AsyncAPI ${document.version()}: ${channels} channels, ${messages} messages`);
