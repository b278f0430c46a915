// Generates docs/API.md from the package's declarations (js/index.d.ts, copied to
// pkg/index.d.ts) with the TypeScript compiler API: the package entry, every interface with its
// members (methods with their signatures, attributes), every dictionary with its members and
// defaults, and the type aliases, each with its doc comment.
//   node scripts/api-docs.mjs           writes docs/API.md
//   node scripts/api-docs.mjs --check   exits 1 when docs/API.md is not what this would write
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const source = path.join(root, 'js/index.d.ts');
const target = path.join(root, 'docs/API.md');
const file = ts.createSourceFile(source, fs.readFileSync(source, 'utf8'), ts.ScriptTarget.Latest, true);

const text = (node) => node.getText(file).replace(/\s+/g, ' ');
function doc(node) {
  const parts = [];
  for (const d of ts.getJSDocCommentsAndTags(node)) {
    if (!ts.isJSDoc(d)) continue;
    if (d.comment) parts.push(ts.getTextOfJSDocComment(d.comment));
    for (const tag of d.tags ?? []) {
      if (tag.tagName.text === 'default') parts.push(`Default: \`${ts.getTextOfJSDocComment(tag.comment)}\`.`);
    }
  }
  return parts.join(' ').replace(/\s+/g, ' ').trim();
}
const cell = (s) => s.replace(/\|/g, '\\|');

const entry = [];
const aliases = [];
const interfaces = new Map();
const constructors = new Map();
function visit(statements, exported) {
  for (const s of statements) {
    if (ts.isModuleDeclaration(s) && s.body && ts.isModuleBlock(s.body)) visit(s.body.statements, false);
    else if (ts.isFunctionDeclaration(s)) entry.push(s);
    else if (ts.isTypeAliasDeclaration(s)) {
      // `export type MLContext = globalThis.MLContext` only re-exports an interface.
      if (!text(s.type).startsWith('globalThis.')) aliases.push(s);
    } else if (ts.isInterfaceDeclaration(s)) {
      const name = s.name.text;
      if (!interfaces.has(name)) interfaces.set(name, { node: s, exported, members: [] });
      interfaces.get(name).members.push(...s.members);
    } else if (ts.isVariableStatement(s) && !exported) {
      for (const d of s.declarationList.declarations) constructors.set(d.name.getText(file), text(d.type));
    }
  }
}
visit(file.statements, true);

function members(list) {
  const rows = [];
  for (const m of list) {
    const name = m.name ? m.name.getText(file) : '';
    if (ts.isMethodSignature(m)) {
      const params = m.parameters.map((p) => text(p)).join(', ');
      rows.push([`\`${name}(${params}): ${text(m.type)}\``, doc(m)]);
    } else if (ts.isPropertySignature(m)) {
      const readonly = m.modifiers?.some((x) => x.kind === ts.SyntaxKind.ReadonlyKeyword) ? 'readonly ' : '';
      rows.push([`\`${readonly}${name}${m.questionToken ? '?' : ''}: ${text(m.type)}\``, doc(m)]);
    }
  }
  return ['| member | description |', '| --- | --- |', ...rows.map(([a, b]) => `| ${cell(a)} | ${cell(b)} |`)].join('\n');
}

const out = [
  '# API reference',
  '',
  'Generated from `js/index.d.ts` (the package\'s `index.d.ts`) by `node scripts/api-docs.mjs`;',
  'do not edit by hand (CI checks it is up to date). Members and types marked "Extension" are',
  'this project\'s additions (see [EXTENSIONS.md](EXTENSIONS.md)); everything else is the WebNN',
  'specification\'s IDL.',
  '',
  '## Package entry (`import { … } from "webnn-wgpu"`)',
  '',
];
for (const f of entry) {
  out.push(`### \`${f.name.text}(${f.parameters.map(text).join(', ')}): ${text(f.type)}\``, '', doc(f), '');
}
out.push('The package also exports the classes `ML`, `MLContext`, `MLGraphBuilder`, `MLOperand`, `MLGraph`, `MLTensor` and `MLWeightFile` (the same objects `install()` defines on `globalThis`).', '');
for (const [name, i] of interfaces) if (i.exported) out.push(`### \`${name}\``, '', doc(i.node), '', members(i.members), '');

const classes = [...interfaces].filter(([name, i]) => !i.exported && constructors.has(name));
const dicts = [...interfaces].filter(([name, i]) => !i.exported && !constructors.has(name) && !['Navigator', 'WorkerNavigator', 'GPUDevice'].includes(name));
out.push('## Interfaces', '', '`navigator.ml` (on `Navigator` and `WorkerNavigator`) is the `ML` object.', '');
for (const [name, i] of classes) {
  const ctor = constructors.get(name).match(/new \(([^)]*)\): \w+ }/);
  out.push(`### \`${name}\``, '');
  if (doc(i.node)) out.push(doc(i.node), '');
  out.push(ctor ? `Constructor: \`new ${name}(${ctor[1]})\`.` : 'No public constructor.', '', members(i.members), '');
}
out.push('## Dictionaries', '');
for (const [name, i] of dicts) {
  const heritage = i.node.heritageClauses?.map((h) => ` (extends ${h.types.map(text).join(', ')})`).join('') ?? '';
  out.push(`### \`${name}\`${heritage}`, '');
  if (doc(i.node)) out.push(doc(i.node), '');
  out.push(members(i.members), '');
}
out.push('## Types', '', '| type | definition | description |', '| --- | --- | --- |');
for (const a of aliases) out.push(`| \`${a.name.text}\` | ${cell(`\`${text(a.type).replace(/^\| /, '')}\``)} | ${cell(doc(a))} |`);
out.push('');
const markdown = out.join('\n');

if (process.argv.includes('--check')) {
  const current = fs.existsSync(target) ? fs.readFileSync(target, 'utf8') : '';
  if (current !== markdown) {
    console.error('docs/API.md is out of date: run node scripts/api-docs.mjs');
    process.exit(1);
  }
  console.log(`docs/API.md is up to date (${interfaces.size} interfaces and dictionaries, ${aliases.length} types)`);
} else {
  fs.writeFileSync(target, markdown);
  console.log(`wrote ${path.relative(root, target)}`);
}
