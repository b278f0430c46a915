// WebIDL exactness, as WPT's idlharness checks it: the IDL blocks of the specification
// (../shared/webnn-spec/index.bs beside the repository, or $WEBNN_SPEC, else the committed copy
// tests/idl/webnn.idl; when both exist they must be equal) and tests/idl/extensions.idl are parsed
// with webidl2, and every interface, operation, attribute and the NavigatorML mixin is checked
// against what install() defines (tests/browser/idl_check.js): in a page, a SharedWorker and a
// ServiceWorker, each also computing a graph, and in a non-secure page, where nothing may be
// exposed.
// `node tests/browser/idl.mjs --update` copies the specification's IDL to tests/idl/webnn.idl.
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'webidl2';
import { start, openPage, withTimeout, ROOT } from './browser.mjs';

const SPEC = path.resolve(ROOT, process.env.WEBNN_SPEC ?? '../shared/webnn-spec/index.bs');
const COPY = path.join(ROOT, 'tests/idl/webnn.idl');
const EXTENSIONS = path.join(ROOT, 'tests/idl/extensions.idl');
const HEADER = '// The IDL blocks of the WebNN specification (webnn-spec/index.bs), extracted by\n' +
  '// `node tests/browser/idl.mjs --update`. The idl stage fails when they differ from the spec.\n\n';
const INSECURE_HOST = 'webnn-insecure.test';

// Bikeshed's IDL blocks: <script type=idl> (what index.bs uses) or <pre>/<xmp> of class idl,
// whose HTML escapes this does not undo, so finding one is an error rather than a silent miss.
function extractIdl(bs) {
  for (const m of bs.matchAll(/<(?:pre|xmp)\b[^>]*\bclass=(?:"([^"]*)"|'([^']*)'|([^\s>]+))/g)) {
    if ((m[1] ?? m[2] ?? m[3]).split(/\s+/).includes('idl')) {
      throw new Error(`index.bs has an IDL block this test does not read: ${m[0]}`);
    }
  }
  const blocks = [...bs.matchAll(/<script\s+type=(?:idl|"idl"|'idl')\s*>([\s\S]*?)<\/script>/g)].map((m) => m[1].trim());
  if (blocks.length === 0) throw new Error('index.bs has no <script type=idl> block');
  return `${HEADER}${blocks.join('\n\n')}\n`;
}

function specIdl() {
  const copy = fs.existsSync(COPY) ? fs.readFileSync(COPY, 'utf8') : undefined;
  if (!fs.existsSync(SPEC)) {
    if (copy === undefined) throw new Error(`neither ${SPEC} nor ${COPY} exists`);
    console.log(`idl: ${path.relative(ROOT, SPEC)} is missing; using the committed ${path.relative(ROOT, COPY)}`);
    return copy;
  }
  const fresh = extractIdl(fs.readFileSync(SPEC, 'utf8'));
  if (process.argv.includes('--update')) {
    fs.writeFileSync(COPY, fresh);
    console.log(`idl: wrote ${path.relative(ROOT, COPY)}`);
  } else if (fresh !== copy) {
    throw new Error(`${path.relative(ROOT, COPY)} differs from the IDL of ${SPEC}: run node tests/browser/idl.mjs --update and commit it`);
  }
  return fresh;
}

const extAttr = (node, name) => node.extAttrs.find((a) => a.name === name);
// A type as IDL text without its extended attributes: 'MLOperand', 'sequence<unsigned long>'.
function typeName(t) {
  const name = t.union ? `(${t.idlType.map(typeName).join(' or ')})`
    : t.generic ? `${t.generic}<${t.idlType.map(typeName).join(', ')}>`
      : t.idlType;
  return t.nullable ? `${name}?` : name;
}

function exposure(node) {
  const a = extAttr(node, 'Exposed');
  if (a === undefined) return [];
  if (a.rhs.type === '*') return ['*'];
  return Array.isArray(a.rhs.value) ? a.rhs.value.map((v) => v.value) : [a.rhs.value];
}

// The model idl_check.js walks: interfaces and mixins with partials merged, operations grouped
// by name (overloads) with WebIDL's length (the shortest overload's required arguments).
function model(sources) {
  const interfaces = new Map();
  const mixins = new Map();
  const dictionaries = new Map();
  const enums = [];
  const includes = [];
  for (const { ast, extension } of sources) {
    for (const def of ast) {
      if (def.type === 'includes') {
        includes.push({ target: def.target, mixin: def.includes });
        continue;
      }
      if (def.type === 'enum') {
        enums.push({ name: def.name, values: def.values.map((v) => v.value) });
        continue;
      }
      if (def.type === 'dictionary') {
        if (!dictionaries.has(def.name)) dictionaries.set(def.name, { name: def.name, inheritance: null, members: [] });
        const entry = dictionaries.get(def.name);
        if (!def.partial) entry.inheritance = def.inheritance ?? null;
        for (const member of def.members) {
          entry.members.push({ name: member.name, type: typeName(member.idlType), required: member.required });
        }
        continue;
      }
      if (def.type !== 'interface' && def.type !== 'interface mixin') continue;
      const table = def.type === 'interface' ? interfaces : mixins;
      if (!table.has(def.name)) {
        table.set(def.name, { name: def.name, exposed: [], secureContext: false, inheritance: null, extension, constructors: [], operations: [], attributes: [] });
      }
      const entry = table.get(def.name);
      if (!def.partial) {
        Object.assign(entry, { exposed: exposure(def), secureContext: extAttr(def, 'SecureContext') !== undefined, inheritance: def.inheritance ?? null, extension });
      }
      for (const member of def.members) {
        const required = (member.arguments ?? []).filter((a) => !a.optional && !a.variadic).length;
        if (member.type === 'constructor') {
          entry.constructors.push(required);
        } else if (member.type === 'operation' && member.name && (member.special === '' || member.special === 'static')) {
          const isStatic = member.special === 'static';
          const op = entry.operations.find((o) => o.name === member.name && o.static === isStatic);
          const args = member.arguments.map((a) => typeName(a.idlType));
          if (op === undefined) {
            entry.operations.push({ name: member.name, static: isStatic, length: required, arguments: args, overloads: [args], promise: member.idlType.generic === 'Promise', extension });
          } else {
            op.overloads.push(args);
            if (required < op.length) Object.assign(op, { length: required, arguments: args });
          }
        } else if (member.type === 'attribute') {
          entry.attributes.push({
            name: member.name,
            static: member.special === 'static',
            readonly: member.readonly,
            promise: member.idlType.generic === 'Promise',
            type: typeName(member.idlType),
            sameObject: extAttr(member, 'SameObject') !== undefined,
            secureContext: extAttr(member, 'SecureContext') !== undefined,
            extension,
          });
        } else {
          throw new Error(`${def.name}: a ${member.type} member (${member.name ?? member.special}) that this test cannot check yet`);
        }
      }
    }
  }
  return { interfaces: [...interfaces.values()], mixins: [...mixins.values()], dictionaries: [...dictionaries.values()], enums, includes };
}

let specText;
try {
  specText = specIdl();
} catch (e) {
  console.log(`FAIL ${e.message}`);
  process.exit(1);
}
const spec = parse(specText);
const idl = model([{ ast: spec, extension: false }, { ast: parse(fs.readFileSync(EXTENSIONS, 'utf8')), extension: true }]);
const specMembers = idl.interfaces.reduce((n, i) => n + i.operations.filter((o) => !o.extension).length + i.attributes.filter((a) => !a.extension).length, 0);
console.log(`idl: the specification has ${idl.interfaces.filter((i) => !i.extension).length} interfaces, ${specMembers} operations and attributes, ` +
  `${idl.includes.length} includes of ${idl.mixins.length} mixin; the extensions ${idl.interfaces.reduce((n, i) => n + [...i.operations, ...i.attributes].filter((m) => m.extension).length, 0)} members`);

const EXPECTED_OUTPUT = [0.5, 0, 2.5, 0];
const failures = [];

function report(scope, result, { needsMixin }) {
  if (result.error !== undefined) {
    failures.push(`${scope}: ${result.error}`);
    console.log(`FAIL ${scope}: ${result.error}`);
    return;
  }
  const { counts } = result;
  const problems = [...result.failures];
  if (result.installed !== true) problems.push(`install() returned ${result.installed}`);
  const interfaces = idl.interfaces.length;
  if (counts.interfaces !== interfaces) problems.push(`checked ${counts.interfaces} of ${interfaces} interfaces (not exposed here?)`);
  if (counts.operations + counts.attributes < specMembers) problems.push(`checked ${counts.operations + counts.attributes} members, fewer than the spec's ${specMembers}`);
  if (needsMixin && counts.mixinAttributes === 0) problems.push('no mixin member checked (navigator.ml)');
  if (JSON.stringify(result.output) !== JSON.stringify(EXPECTED_OUTPUT)) {
    problems.push(`relu(x - 0.5) gave ${JSON.stringify(result.output)}, expected ${JSON.stringify(EXPECTED_OUTPUT)}`);
  }
  for (const p of problems) console.log(`FAIL ${scope}: ${p}`);
  failures.push(...problems.map((p) => `${scope}: ${p}`));
  console.log(`${problems.length === 0 ? 'ok  ' : 'FAIL'} ${scope}${result.global ? ` (${result.global})` : ''}: ${counts.interfaces} interfaces, ` +
    `${counts.operations} operations, ${counts.attributes} attributes (${counts.extensionMembers} of them extensions), ` +
    `${counts.mixinAttributes} mixin attributes, ${counts.dictionaryArguments} dictionary arguments, ${counts.enumConversions} enum conversions, ${counts.instances} instances, ${counts.assertions} assertions; ` +
    `graph output ${JSON.stringify(result.output)}`);
}

const { browser, server, url, close } = await start(undefined, [`--host-resolver-rules=MAP ${INSECURE_HOST} 127.0.0.1`]);
try {
  const page = await openPage(browser, `${url}/tests/browser/idl.html`, 'idl');
  await page.waitForFunction(() => window.idl !== undefined, null, { timeout: 60000 });
  report('Window', await withTimeout(page.evaluate((m) => window.idl.runWindow(m), idl), 120000, 'Window'), { needsMixin: true });
  report('SharedWorker', await withTimeout(page.evaluate((m) => window.idl.runSharedWorker(m), idl), 120000, 'SharedWorker'), { needsMixin: true });
  report('ServiceWorker', await withTimeout(page.evaluate((m) => window.idl.runServiceWorker(m), idl), 120000, 'ServiceWorker'), { needsMixin: true });

  const insecure = await openPage(browser, `http://${INSECURE_HOST}:${server.address().port}/tests/browser/idl.html`, 'idl-insecure');
  await insecure.waitForFunction(() => window.idl !== undefined, null, { timeout: 60000 });
  const result = await insecure.evaluate((m) => window.idl.runInsecure(m), idl);
  for (const p of result.failures) console.log(`FAIL non-secure page: ${p}`);
  failures.push(...result.failures.map((p) => `non-secure page: ${p}`));
  console.log(`${result.failures.length === 0 ? 'ok  ' : 'FAIL'} non-secure page: ${result.checked} [SecureContext] interfaces and members not exposed`);
} catch (e) {
  failures.push(e.message.split('\n')[0]);
  console.log(`FAIL ${e.message.split('\n')[0]}`);
} finally {
  await close();
}
console.log(`idl: ${failures.length === 0 ? 'ok' : `${failures.length} failures`}`);
process.exit(failures.length === 0 ? 0 : 1);
