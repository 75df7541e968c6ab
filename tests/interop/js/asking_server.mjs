// A server on the TypeScript SDK that asks its client for sampling and elicitation whatever the
// client advertised (server-everything only offers those tools to clients that advertise them).
// Its one tool, "ask", sends sampling/createMessage and elicitation/create and reports, for each,
// the client's answer or error and how long it took.
//
// Usage: node asking_server.mjs   (stdio)

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "asking-server", version: "1.0.0" });

const anything = z.object({}).passthrough();

async function ask(method, params) {
  const started = Date.now();
  try {
    const result = await server.server.request({ method, params }, anything, { timeout: 30000 });
    return { method, result, ms: Date.now() - started };
  } catch (error) {
    return { method, error: { code: error.code, message: error.message }, ms: Date.now() - started };
  }
}

server.registerTool("ask", { description: "Ask the client for sampling and elicitation." }, async () => {
  const answers = [
    await ask("sampling/createMessage", {
      messages: [{ role: "user", content: { type: "text", text: "hello" } }],
      maxTokens: 10,
    }),
    await ask("elicitation/create", {
      message: "Your name?",
      requestedSchema: { type: "object", properties: { name: { type: "string" } } },
    }),
  ];
  return { content: [{ type: "text", text: JSON.stringify(answers) }] };
});

await server.connect(new StdioServerTransport());
