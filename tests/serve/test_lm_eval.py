"""lm-evaluation-harness (lm_eval from PyPI, model `local-completions`) against a real
`orzo serve` on stories260K: a loglikelihood task read from a local file, the tokenizer taken
from the server (/tokenizer_info, /tokenize, /detokenize). Each item's score (the
continuation's summed logprob, and whether it is the greedy one) must equal what orzo's own
scoring of the same tokens gives (echo with max_tokens 0)."""
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

from harness import Server

# Contexts and continuations in TinyStories' English, some likely, some not.
ITEMS = [
    ("Once upon a time, there was a little", " girl"),
    ("Once upon a time, there was a little", " elephant who could fly"),
    ("Lily wanted to play with the ball. She ran to the", " park"),
    ("The sun was shining and the birds were", " singing"),
    ("Tom was sad because he lost his", " toy"),
    ("One day, a big dog saw a cat in the", " garden. The dog wanted to be friends"),
]

TASK = """task: orzo_stories
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood
doc_to_text: "{{{{context}}}}"
doc_to_target: "{{{{continuation}}}}"
target_delimiter: ""
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""


class LmEval(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--served-model-name", "stories")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, "".join(cls.server.log)

    def tokenize(self, text):
        status, _, out = self.server.post("/tokenize", {"prompt": text, "add_special_tokens": False})
        self.assertEqual(status, 200, out)
        return out["tokens"]

    def own_score(self, context, continuation):
        """orzo scoring the tokens lm_eval sends: the whole text tokenized, the context's
        tokens first, the rest the continuation's (lm_eval's _encode_pair)."""
        whole, head = self.tokenize(context + continuation), self.tokenize(context)
        status, _, out = self.server.post("/v1/completions", {"prompt": whole, "echo": True, "logprobs": 1,
                                                               "max_tokens": 0, "temperature": 0})
        self.assertEqual(status, 200, out)
        lp = out["choices"][0]["logprobs"]
        tail = range(len(head), len(whole))
        return (sum(lp["token_logprobs"][i] for i in tail),
                all(lp["token_logprobs"][i] == max(lp["top_logprobs"][i].values()) for i in tail))

    def test_loglikelihood_task_scores_equal_orzos_own(self):
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "items.jsonl")
            with open(data, "w") as f:
                for context, continuation in ITEMS:
                    f.write(json.dumps({"context": context, "continuation": continuation}) + "\n")
            tasks = os.path.join(tmp, "tasks")
            os.mkdir(tasks)
            with open(os.path.join(tasks, "orzo_stories.yaml"), "w") as f:
                f.write(TASK.format(data=data))
            out = os.path.join(tmp, "out")
            env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf"),
                       TOKENIZERS_PARALLELISM="false")
            run = subprocess.run(
                [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args",
                 f"base_url={self.server.base}/v1/completions,model=stories,tokenizer_backend=remote,"
                 "num_concurrent=2,max_retries=1", "--tasks", "orzo_stories", "--include_path", tasks,
                 "--output_path", out, "--log_samples"],
                env=env, capture_output=True, text=True, timeout=240)
            self.assertEqual(run.returncode, 0, run.stdout[-3000:] + run.stderr[-5000:])
            samples = glob.glob(os.path.join(out, "**", "samples_orzo_stories_*.jsonl"), recursive=True)
            self.assertEqual(len(samples), 1, run.stdout + run.stderr[-3000:])
            with open(samples[0]) as f:
                rows = [json.loads(line) for line in f]
        self.assertEqual(len(rows), len(ITEMS))
        for row in rows:
            context, continuation = row["doc"]["context"], row["doc"]["continuation"]
            (logprob, greedy), = [tuple(r) for r in row["resps"][0]]
            with self.subTest(context=context, continuation=continuation):
                want_logprob, want_greedy = self.own_score(context, continuation)
                self.assertTrue(math.isfinite(float(logprob)))
                self.assertAlmostEqual(float(logprob), want_logprob, places=5)
                self.assertEqual(str(greedy) == "True", want_greedy)
        # The likely continuation outscores the unlikely one after the same context.
        by_item = {(r["doc"]["context"], r["doc"]["continuation"]): float(r["resps"][0][0][0]) for r in rows}
        self.assertGreater(by_item[ITEMS[0]], by_item[ITEMS[1]])


if __name__ == "__main__":
    unittest.main()
