// An HTTP function as a TypeScript default export: tsc turns `export default` into
// `exports.default = hello`, which the worker takes as the entry point.
import { AzureFunction, Context, HttpRequest } from "@azure/functions";

const hello: AzureFunction = async function (context: Context, req: HttpRequest): Promise<void> {
    const name: string | undefined = req.query.name || (req.body && req.body.name);
    if (!name) {
        context.res = { status: 400, body: "Pass a name in the query string or in a JSON body." };
        return;
    }
    context.log(`Saying hello to ${name}`);
    context.res = { body: `Hello, ${name}!` };
};

export default hello;
