"""The chat page at / in a real browser: Debian's headless chromium, driven through its
chromedriver by Selenium. The model is SmolLM2-135M-Instruct (../shared), slow enough on a CPU
that a reply can be stopped while it streams. A screenshot of each test's page is written
to $ORZO_ARTIFACTS (ctest sets it to the build's tests/artifacts)."""
import json
import os
import shutil
import tempfile
import time
import unittest

from harness import SHARED, Server, wait_for

SMOLLM2 = os.path.join(SHARED, "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
ARTIFACTS = os.environ.get("ORZO_ARTIFACTS", os.path.join(tempfile.gettempdir(), "orzo-webui"))
SYSTEM = "You are a helpful assistant."
QUESTION = "What is the capital of France?"

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:  # tests/requirements.txt has it; scripts/bootstrap.sh installs it
    webdriver = None


def missing():
    if webdriver is None:
        return "the selenium package is missing (pip install -r tests/requirements.txt)"
    if not CHROMIUM or not CHROMEDRIVER:
        return "Debian's chromium and chromium-driver are not installed"
    if not os.path.exists(SMOLLM2):
        return SMOLLM2 + " is missing"
    return None


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,800"):
        options.add_argument(arg)
    # The driver is named, so Selenium never looks for (or downloads) one of its own.
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


@unittest.skipIf(missing(), missing())
class ChatPage(unittest.TestCase):
    KEY = None

    @classmethod
    def setUpClass(cls):
        args = ["--served-model-name", "smollm2"] + (["--api-key", cls.KEY] if cls.KEY else [])
        cls.server = Server(*args, model=SMOLLM2, ready_timeout=120)
        cls.driver = browser()
        cls.driver.set_script_timeout(120)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.server.stop()

    def tearDown(self):
        os.makedirs(ARTIFACTS, exist_ok=True)
        self.driver.save_screenshot(os.path.join(ARTIFACTS, f"{type(self).__name__}.{self._testMethodName}.png"))

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def open_page(self):
        self.driver.get(self.server.base + "/")
        self.js("localStorage.clear()")
        self.driver.get(self.server.base + "/")
        if self.KEY:
            self.assertTrue(wait_for(lambda: self.js("return document.getElementById('key-dialog').open"), 10),
                            "the page did not ask for the key")
            self.driver.find_element(By.ID, "key").send_keys(self.KEY)
            self.driver.find_element(By.ID, "key-save").click()
        self.assertTrue(wait_for(lambda: self.js("return document.body.dataset.model") == "smollm2", 15),
                        "the page did not show the model: " + self.driver.find_element(By.ID, "model").text)
        self.assertTrue(wait_for(lambda: self.driver.find_element(By.ID, "health").text == "ok", 15))

    def set_settings(self, **values):
        self.driver.find_element(By.ID, "open-settings").click()
        for field, value in values.items():
            box = self.driver.find_element(By.ID, "s-" + field)
            box.clear()
            box.send_keys(str(value))
        self.driver.find_element(By.ID, "s-save").click()
        # The page stores them on the dialog's close event, a task queued by the click: a
        # reload right after it could come first (it did, one CI run in three).
        want = {field.replace("-", "_"): str(value) for field, value in values.items()}

        def stored():
            kept = json.loads(self.js("return localStorage.getItem('orzo.settings')") or "{}")
            return all(kept.get(key) == value for key, value in want.items())
        self.assertTrue(wait_for(stored, 10), "the settings were not stored")

    def send(self, text):
        box = self.driver.find_element(By.ID, "input")
        box.send_keys(text)
        box.send_keys(Keys.ENTER)

    # Every change of the last reply's text, recorded in the page as it happens.
    WATCH = """
      window.seen = [];
      new MutationObserver(() => {
        const replies = document.querySelectorAll('.msg.assistant');
        if (replies.length) window.seen.push(replies[replies.length - 1].dataset.raw.length);
      }).observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true});"""

    def last_reply(self, timeout=120):
        self.assertTrue(wait_for(lambda: self.js(
            "const r = document.querySelectorAll('.msg.assistant, .msg.error'); return r.length && r[r.length-1].dataset.done"),
            timeout), "the reply did not end")
        return self.js("const r = document.querySelectorAll('.msg.assistant, .msg.error'); const d = r[r.length-1];"
                       "return {raw: d.dataset.raw, done: d.dataset.done, text: d.querySelector('.body').textContent,"
                       "        html: d.querySelector('.body').innerHTML}")

    def api(self, body):
        headers = {"Authorization": "Bearer " + self.KEY} if self.KEY else {}
        status, _, reply = self.server.post("/v1/chat/completions", body, headers=headers)
        self.assertEqual(status, 200, reply)
        return reply

    def test_streamed_reply_equals_the_apis_greedy_reply(self):
        self.open_page()
        self.set_settings(system=SYSTEM, temperature=0, **{"max-tokens": 48})
        self.js(self.WATCH)
        self.send(QUESTION)
        reply = self.last_reply()
        self.assertEqual(reply["done"], "true", reply)
        grown = [n for n in self.js("return window.seen") if 0 < n < len(reply["raw"])]
        self.assertTrue(grown, "no partial text was shown before the reply ended")
        expected = self.api({"model": "smollm2", "temperature": 0, "max_tokens": 48,
                             "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]})
        self.assertEqual(reply["raw"], expected["choices"][0]["message"]["content"])
        self.assertIn("Paris", reply["text"])
        self.assertRegex(self.driver.find_element(By.ID, "rate").text, r"^\d+(\.\d+)? tokens/s")

        # Regenerate: the same greedy reply again, in place of the first.
        self.js("document.querySelector('.msg.assistant .regenerate').click()")
        again = self.last_reply()
        self.assertEqual(again["raw"], reply["raw"])
        self.assertEqual(self.js("return document.querySelectorAll('.msg.assistant').length"), 1)

    def test_settings_are_kept_in_the_browser(self):
        self.open_page()
        self.set_settings(system="Be brief.", temperature=0.3, **{"top-p": 0.9, "max-tokens": 77, "seed": 5})
        self.driver.refresh()
        kept = json.loads(self.js("return localStorage.getItem('orzo.settings')"))
        self.assertEqual(kept, {"system": "Be brief.", "temperature": "0.3", "top_p": "0.9", "max_tokens": "77",
                                "seed": "5"})
        self.driver.find_element(By.ID, "open-settings").click()
        self.assertEqual(self.driver.find_element(By.ID, "s-max-tokens").get_attribute("value"), "77")

    def test_stop_cancels_the_request(self):
        self.open_page()
        self.set_settings(temperature=0.8, seed=1, **{"max-tokens": 2000})
        aborted = self.server.metric("orzo:request_success_total", finished_reason="abort")
        self.send("Tell me a very long story about a dragon.")
        self.assertTrue(wait_for(lambda: self.js(
            "const r = document.querySelectorAll('.msg.assistant'); return r.length && r[r.length-1].dataset.raw.length > 0"),
            60), "no text streamed")
        self.driver.find_element(By.ID, "stop").click()
        reply = self.last_reply()
        self.assertEqual(reply["done"], "stopped")
        self.assertTrue(wait_for(lambda: self.server.metric("orzo:request_success_total", finished_reason="abort")
                                 == aborted + 1, 10), "/metrics counted no abort")
        self.assertEqual(self.driver.find_element(By.ID, "send").get_attribute("disabled"), None)

    def test_a_reply_with_html_is_shown_as_text(self):
        """The server's replies come from a model; here the page's fetch is handed a stream whose
        reply holds markup, so what the renderer does with it is known."""
        self.open_page()
        self.js("""
          const hostile = "<script>window.pwned = 1<\\/script><img src=x onerror='window.pwned = 2'> **bold** `a<b`";
          const real = window.fetch;
          window.fetch = (url, init) => {
            if (!String(url).endsWith('/v1/chat/completions')) return real(url, init);
            const event = (delta) => 'data: ' + JSON.stringify({choices: [{index: 0, delta}]}) + '\\n\\n';
            const body = event({role: 'assistant'}) + event({content: hostile.slice(0, 20)}) +
                         event({content: hostile.slice(20)}) + 'data: [DONE]\\n\\n';
            return Promise.resolve(new Response(body, {status: 200, headers: {'Content-Type': 'text/event-stream'}}));
          };""")
        self.send("Say something with HTML in it.")
        reply = self.last_reply()
        self.assertEqual(reply["done"], "true")
        self.assertIsNone(self.js("return window.pwned"))
        self.assertIn("<script>window.pwned = 1</script>", reply["text"])
        self.assertNotIn("<img", reply["html"])
        self.assertIn("<strong>bold</strong>", reply["html"])
        self.assertIn("<code>a&lt;b</code>", reply["html"])
        self.assertEqual(self.js("return document.querySelectorAll('.msg script, .msg img').length"), 0)


class ChatPageWithAKey(ChatPage):
    """The same page when the server wants a key: it asks, keeps it, and sends it."""
    KEY = "sk-webui-test"

    def test_the_key_is_kept_in_the_browser(self):
        self.open_page()
        self.assertEqual(self.js("return localStorage.getItem('orzo.api_key')"), self.KEY)


class ServedPage(unittest.TestCase):
    def test_no_webui_leaves_no_page(self):
        with Server("--no-webui") as server:
            status, _, body = server.request("GET", "/")
            self.assertEqual(status, 404)
            self.assertEqual(json.loads(body)["error"]["code"], "not_found")
            server.stop()

    def test_the_page_takes_only_get(self):
        with Server() as server:
            status, headers, body = server.request("POST", "/", b"garbage\x00\xff")
            self.assertEqual(status, 405)
            self.assertEqual(headers["allow"], "GET")
            self.assertEqual(json.loads(body)["error"]["code"], "method_not_allowed")
            server.stop()

    def test_the_page_is_served_whole_with_its_policy(self):
        with Server() as server:
            status, headers, body = server.request("GET", "/")
            self.assertEqual(status, 200)
            self.assertTrue(headers["content-type"].startswith("text/html"))
            self.assertIn("connect-src 'self'", headers["content-security-policy"])
            page = body.decode()
            self.assertTrue(page.rstrip().endswith("</html>"))
            for external in ("http://", "https://", "//cdn", "@import"):
                self.assertNotIn(external, page.replace("https?:\\/\\/", ""))
            server.stop()


if __name__ == "__main__":
    unittest.main()
