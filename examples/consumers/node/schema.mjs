// Validates an orderd event's data against the schema its dataschema
// attribute names: the URL of orderd's AsyncAPI document (YAML) with a JSON
// pointer to the schema, e.g.
// http://127.0.0.1:8081/v1/asyncapi.yaml#/components/schemas/Order.
//
// The document is fetched once per URL and added to ajv under that URL;
// ajv then resolves the pointer and compiles each schema once. The
// document's top-level AsyncAPI fields are declared to ajv as keywords it
// does not validate, so ajv's strict mode stays on for the schemas.
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

const asyncapiFields = ['asyncapi', 'info', 'servers', 'defaultContentType', 'channels', 'operations', 'components'];

export class Schemas {
  constructor({ token = '' } = {}) {
    this.token = token;
    // The AsyncAPI document's schemas are JSON Schema draft 7: ajv's default.
    this.ajv = new Ajv({ allErrors: true });
    addFormats(this.ajv);
    this.ajv.addVocabulary(asyncapiFields);
    this.docs = new Map(); // document URL -> Promise of its addition
  }

  // validate returns null when data matches the schema at dataschema, else
  // the errors as one line. It throws when the schema cannot be fetched.
  async validate(dataschema, data) {
    if (!dataschema) return 'no dataschema attribute';
    const url = dataschema.split('#')[0];
    if (!this.docs.has(url)) this.docs.set(url, this.#add(url));
    await this.docs.get(url);
    const check = this.ajv.getSchema(dataschema);
    if (!check) throw new Error(`${dataschema}: no schema at that pointer`);
    if (check(data)) return null;
    return this.ajv.errorsText(check.errors, { dataVar: 'data' });
  }

  async #add(url) {
    const headers = this.token ? { authorization: `Bearer ${this.token}` } : {};
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${res.statusText}`);
    this.ajv.addSchema(parse(await res.text()), url);
  }
}
