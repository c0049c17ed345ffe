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
  await page.fill("#max_tokens", "3000");
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

  // The conversation outlives a reload (localStorage).
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 6);
  step("the conversation is there after a reload");

  // The live view: a lane busy while a long completion runs, idle after.
  await page.click("#tab-live");
  await page.waitForFunction(() => document.querySelectorAll("#lanes tbody tr").length > 0);
  const ac = new AbortController();
  const long = fetch(url + "/completion", {
    method: "POST", headers: { "Content-Type": "application/json" }, signal: ac.signal,
    body: JSON.stringify({ prompt: "Count to a million.", n_predict: 3000, ignore_eos: true, stream: true, temperature: 0 }),
  }).then((r) => r.body.getReader().read()).catch(() => {});
  await page.waitForSelector("#lanes tbody tr.busy");
  const busyRow = await page.locator("#lanes tbody tr.busy").first().textContent();
  step(`live view shows a busy lane: ${busyRow}`);
  await shot(page, "live-busy.png");
  ac.abort();
  await long;
  await page.waitForFunction(() => document.querySelectorAll("#lanes tbody tr").length > 0 && document.querySelectorAll("#lanes tbody tr.busy").length === 0);
  step(`live view shows every lane idle (${await page.locator("#live-source").textContent()})`);
  await shot(page, "live-idle.png");

  expect(problems.length === 0, `the page reported: ${problems.join("; ")}`);
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
