// Drives the built-in web page in headless Chromium, as a person would:
// e2e/webpage_test.go starts a real server with two synthetic models and
// runs this with its URL, the directory for screenshots and the two
// model names. Each step prints what it saw; any failure exits 1.
import { chromium } from "playwright-core";
import path from "node:path";

// With "--key KEY" after the URL, the server wants that API key: the page
// must ask for it, keep it, and chat with it (keyed()).
const args = process.argv.slice(2);
const keyAt = args.indexOf("--key");
const apiKey = keyAt >= 0 ? args.splice(keyAt, 2)[1] : "";
const [url, shots, first, second] = args;
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const step = (msg) => console.log(`step: ${msg}`);

const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ["--no-sandbox"] });
let failed = false;
try {
  await (apiKey ? keyed() : run());
} catch (e) {
  failed = true;
  console.error(`FAIL: ${e.stack || e}`);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);

async function shot(page, name) {
  const p = path.join(shots, name);
  await page.screenshot({ path: p, fullPage: true });
  console.log(`screenshot: ${p}`);
}

// until polls cond (a check of what the script itself recorded) for up
// to 20 s.
async function until(cond, what) {
  for (let i = 0; i < 400; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function expect(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function run() {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.setDefaultTimeout(20000);
  // Anything the page's console says is wrong (a CSP refusal, a script
  // error, a failed load) fails the test.
  const problems = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  const chats = [];
  page.on("request", (r) => {
    if (r.url().endsWith("/v1/chat/completions")) chats.push(JSON.parse(r.postData() || "{}"));
  });

  step(`open ${url}`);
  await page.goto(url + "/", { waitUntil: "load" });
  expect((await page.title()) === "superfluid", `the page's title is ${await page.title()}`);
  await page.waitForFunction((n) => document.querySelectorAll("#model option").length >= n, 2);
  const models = await page.$$eval("#model option", (os) => os.map((o) => o.value));
  step(`model picker lists ${models.join(", ")}`);
  expect(models.includes(first) && models.includes(second), `the picker lacks ${first} or ${second}`);

  // A chat with the first model: the answer streams in, then its figures.
  await page.click("#settings-toggle");
  await page.fill("#temperature", "0");
  await page.fill("#max_tokens", "24");
  await page.selectOption("#model", first);
  await page.fill("#prompt", "Tell me a story about a river.");
  await page.press("#prompt", "Enter");
  const reply = page.locator(".msg.assistant").last();
  await page.waitForSelector('.msg.assistant[data-state="done"]');
  const text = await reply.locator(".content").textContent();
  const stats = await reply.locator(".stats").textContent();
  step(`${first} answered ${JSON.stringify(text)} — ${stats}`);
  expect(text.length > 0, "the reply is empty");
  expect(/tok\/s/.test(stats) && /first token/.test(stats) && /cached/.test(stats), `the reply's figures lack speed, first token or cache: ${stats}`);
  expect((await reply.locator(".error").count()) === 0, "the reply shows an error");
  await shot(page, "chat.png");

  // Switch models: the next turn goes to the second one.
  await page.selectOption("#model", second);
  await page.fill("#prompt", "And another one.");
  await page.press("#prompt", "Enter");
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant[data-state="done"]').length === 2);
  const role = await page.locator(".msg.assistant").last().locator(".role").textContent();
  step(`second turn answered by ${role}; requests named ${chats.map((c) => c.model).join(", ")}`);
  expect(role === second && chats.length === 2 && chats[1].model === second, `the second turn did not go to ${second}`);
  expect(chats[1].stream === true && chats[1].stream_options.include_usage === true && chats[1].temperature === 0 && chats[1].max_tokens === 24, `the request body: ${JSON.stringify(chats[1])}`);
  expect(chats[1].messages.length === 3, `the second turn did not carry the conversation: ${JSON.stringify(chats[1].messages)}`);

  // Stop a long generation once its first tokens are shown.
  await page.fill("#max_tokens", "12000");
  await page.fill("#prompt", "Go on, at length.");
  await page.press("#prompt", "Enter");
  await page.waitForFunction(() => {
    const m = [...document.querySelectorAll(".msg.assistant")].pop();
    return m && m.dataset.state === "streaming" && m.querySelector(".content").textContent.length > 0;
  });
  await page.click("#stop");
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant[data-state="done"]').length === 3);
  const stopped = await page.locator(".msg.assistant").last().locator(".stats").textContent();
  step(`stopped: ${stopped}`);
  expect(/stopped/.test(stopped), `the third reply was not stopped: ${stopped}`);
  expect(await page.isEnabled("#send"), "Send stays disabled after a stop");
  await shot(page, "stopped.png");

  // Regenerate asks the last turn again in place; edit rewrites a user
  // message and drops what followed it.
  await page.fill("#max_tokens", "8");
  await page.click(".msg.assistant:last-child button.regenerate");
  await until(() => chats.length === 4, "the regenerate request");
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant[data-state="done"]').length === 3 && !document.querySelector("#send").disabled);
  expect(chats.length === 4 && chats[3].messages.length === 5 && chats[3].messages[4].content === "Go on, at length.", `regenerate sent ${JSON.stringify(chats[3] && chats[3].messages)}`);
  expect((await page.locator(".msg").count()) === 6, "regenerate did not replace the last reply");
  step("regenerate asked the last turn again in place");
  await page.click('.msg.user[data-index="2"] button.edit');
  await page.fill('.msg.user[data-index="2"] textarea', "An edited question.");
  await page.click('.msg.user[data-index="2"] .actions button:first-child');
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 4 && document.querySelector(".msg.assistant:last-child").dataset.state === "done");
  expect(chats.length === 5 && chats[4].messages.length === 3 && chats[4].messages[2].content === "An edited question.", `edit sent ${JSON.stringify(chats[4] && chats[4].messages)}`);
  step("edit rewrote the second question and dropped what followed");

  // Reasoning and tool calls render apart from the answer, and an API
  // error is shown: a scripted stream in the server's chunk shapes (the
  // synthetic model neither reasons nor calls tools).
  const chunk = (delta, finish = null) => `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  await page.route("**/v1/chat/completions", (route) => route.fulfill({
    status: 200, headers: { "Content-Type": "text/event-stream" },
    body: chunk({ role: "assistant", content: "" }) + chunk({ reasoning_content: "Weighing the river." }) + chunk({ content: "Let me look." }) +
      chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":"Paris"}' } }] }) + chunk({}, "tool_calls") +
      `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 12, prompt_tokens_details: { cached_tokens: 5 } }, timings: { predicted_per_second: 42.5 } })}\n\ndata: [DONE]\n\n`,
  }));
  await page.fill("#prompt", "What's the weather?");
  await page.press("#prompt", "Enter");
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 6 && document.querySelector(".msg.assistant:last-child").dataset.state === "done");
  const last = page.locator(".msg.assistant").last();
  const reasoning = await last.locator("details.reasoning div").textContent();
  const answer = await last.locator(".content").textContent();
  const tool = await last.locator(".tool").textContent();
  const figures = await last.locator(".stats").textContent();
  step(`scripted reply: reasoning ${JSON.stringify(reasoning)}, answer ${JSON.stringify(answer)}, tool ${JSON.stringify(tool)}, ${figures}`);
  expect(reasoning === "Weighing the river." && answer === "Let me look.", "reasoning and answer are not apart");
  expect(tool.includes("get_weather") && tool.includes('{"city":"Paris"}'), "the tool call block is wrong");
  expect(figures.includes("42.5 tok/s") && figures.includes("50% cached") && figures.includes("tool_calls"), `the scripted figures: ${figures}`);
  await shot(page, "reasoning-tools.png");
  await page.unroute("**/v1/chat/completions");
  await page.route("**/v1/chat/completions", (route) => route.fulfill({
    status: 400, headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ error: { message: "temperature must be at most 2", type: "invalid_request_error", param: "temperature", code: null } }),
  }));
  await page.fill("#prompt", "Fail, please.");
  await page.press("#prompt", "Enter");
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 8 && document.querySelector(".msg.assistant:last-child").dataset.state === "done");
  const shown = await page.locator(".msg.assistant").last().locator(".error").textContent();
  expect(shown === "temperature must be at most 2", `the error shown: ${shown}`);
  step(`an API error is shown: ${shown}`);
  await page.unroute("**/v1/chat/completions");
  const sent = chats.length;

  // The conversation outlives a reload (localStorage).
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 8);
  step("the conversation is there after a reload");

  // Unload: Ollama's keep_alive 0 for the model picked; the live view
  // then lists only the other.
  await page.selectOption("#model", second);
  await page.click("#unload");
  await page.waitForFunction((m) => document.querySelector("#conn").textContent === `${m} unloaded`, second);
  step(`${second} unloaded`);
  await page.waitForFunction((m) => [...document.querySelectorAll("#model option")].some((o) => o.value === m && o.textContent === m), second);
  const labels = await page.$$eval("#model option", (os) => os.map((o) => o.textContent));
  expect(labels.includes(`${first} (loaded)`), `the picker does not say ${first} is loaded: ${labels}`);
  step(`the picker says: ${labels.join(", ")}`);

  // The live view: a lane busy while a long completion runs, idle after.
  await page.click("#tab-live");
  await page.waitForFunction(() => document.querySelectorAll("#lanes tbody tr").length > 0);
  const ac = new AbortController();
  const long = fetch(url + "/completion", {
    method: "POST", headers: { "Content-Type": "application/json" }, signal: ac.signal,
    body: JSON.stringify({ prompt: "Count to a million.", n_predict: 12000, ignore_eos: true, stream: true, temperature: 0 }),
  }).then((r) => r.body.getReader().read()).catch(() => {});
  await page.waitForFunction(([a, b]) => {
    const names = [...document.querySelectorAll("#models tbody tr td:first-child")].map((td) => td.textContent);
    return names.includes(a) && !names.includes(b);
  }, [first, second]);
  const loaded = await page.$$eval("#models tbody tr td:first-child", (tds) => tds.map((td) => td.textContent));
  step(`the live view lists the models loaded: ${loaded.join(", ")}`);
  await page.waitForSelector("#lanes tbody tr.busy");
  const busyRow = await page.locator("#lanes tbody tr.busy").first().textContent();
  step(`live view shows a busy lane: ${busyRow}`);
  await shot(page, "live-busy.png");
  ac.abort();
  await long;
  await page.waitForFunction(() => document.querySelectorAll("#lanes tbody tr").length > 0 && document.querySelectorAll("#lanes tbody tr.busy").length === 0);
  step(`live view shows every lane idle (${await page.locator("#live-source").textContent()})`);
  await shot(page, "live-idle.png");

  // Without the event stream (a proxy that drops it), the view polls.
  await page.route("**/v1/status/events", (route) => route.fulfill({ status: 404, headers: { "Content-Type": "application/json" }, body: '{"error":{"message":"no"}}' }));
  await page.reload({ waitUntil: "load" });
  await page.click("#tab-live");
  await page.waitForFunction(() => document.querySelector("#live-source").textContent.startsWith("polling /v1/status") && document.querySelectorAll("#lanes tbody tr").length > 0);
  step(`without the event stream: ${await page.locator("#live-source").textContent()}`);
  await page.unroute("**/v1/status/events");

  expect(chats.length === sent, "the live view sent chats");
  // The scripted 400 and 404 are the console errors the browser logs itself.
  const unexpected = problems.filter((p) => !p.includes("400 (Bad Request)") && !p.includes("404 (Not Found)"));
  expect(unexpected.length === 0, `the page reported: ${unexpected.join("; ")}`);
}

// keyed: a server started with --api-key. The page's first request (the
// model list) is answered 401, the page asks for the key, then lists the
// models and chats with it, and keeps it over a reload.
async function keyed() {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.setDefaultTimeout(20000);
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  step(`open ${url} (the server wants a key)`);
  await page.goto(url + "/", { waitUntil: "load" });
  await page.waitForSelector("#key-dialog[open]");
  step("the page asks for the key");
  await shot(page, "key.png");
  await page.fill("#key", apiKey);
  await page.click('#key-form button[value="ok"]');
  await page.waitForFunction((n) => document.querySelectorAll("#model option").length >= n, 1);
  step("with the key, the model list loads");
  await page.click("#settings-toggle");
  await page.fill("#max_tokens", "16");
  await page.fill("#prompt", "Hello with a key.");
  await page.press("#prompt", "Enter");
  await page.waitForSelector('.msg.assistant[data-state="done"]');
  const reply = page.locator(".msg.assistant").last();
  expect((await reply.locator(".error").count()) === 0, `the keyed chat failed: ${await reply.textContent()}`);
  expect((await reply.locator(".content").textContent()).length > 0, "the keyed reply is empty");
  step(`keyed chat answered: ${await reply.locator(".stats").textContent()}`);
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll("#model option").length > 0);
  expect(!(await page.isVisible("#key-dialog")), "the page asked again after a reload");
  step("the key is kept over a reload");
  await page.click("#tab-live");
  await page.waitForFunction(() => document.querySelectorAll("#lanes tbody tr").length > 0);
  const source = await page.locator("#live-source").textContent();
  expect(source === "live: /v1/status/events", `the live view did not follow the events with the key: ${source}`);
  step("the live view follows /v1/status/events with the key");
  // The server's 401 before the key was given is the console error the
  // browser logs for it; anything thrown by the page fails the test.
  expect(problems.length === 0, `the page reported: ${problems.join("; ")}`);
}
