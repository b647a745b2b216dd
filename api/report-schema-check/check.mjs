// Validates the JSON report's schema and reports against it with Ajv, a
// JSON Schema validator maintained outside orderd, so the schema is not
// only checked by the validator orderd's own tests use. The schema is
// compiled in Ajv's strict mode (an unknown keyword or a meaningless
// combination fails), formats are asserted, and every report given must
// validate. Then the first report is broken on purpose (an amount written
// as a JSON number) and must be refused, so a validator that accepts
// everything cannot pass this check.
import { readFile } from 'node:fs/promises';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const [schemaFile, ...reports] = process.argv.slice(2);
if (!schemaFile || reports.length === 0) {
  console.error('usage: node check.mjs SCHEMA REPORT...');
  process.exit(2);
}
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv);
const validate = ajv.compile(JSON.parse(await readFile(schemaFile, 'utf8')));
console.log(`${schemaFile}: compiles (JSON Schema draft 2020-12, strict)`);

let bad = 0;
for (const file of reports) {
  const report = JSON.parse(await readFile(file, 'utf8'));
  if (validate(report)) {
    console.log(`${file}: valid`);
    continue;
  }
  bad++;
  for (const e of validate.errors) {
    console.log(`${file}: ${e.instancePath || '/'}: ${e.message}`);
  }
}
if (bad > 0) {
  console.error(`${bad} of ${reports.length} reports do not follow ${schemaFile}`);
  process.exit(1);
}

const broken = JSON.parse(await readFile(reports[0], 'utf8'));
if (!broken.currencies?.length) {
  console.error(`${reports[0]}: has no currency to break for the negative check`);
  process.exit(1);
}
broken.currencies[0].payins.grossAuthorized = 350;
if (validate(broken)) {
  console.error(`${schemaFile}: accepts an amount written as a JSON number`);
  process.exit(1);
}
console.log(`${schemaFile}: refuses a report whose amount is a JSON number, as it should`);
