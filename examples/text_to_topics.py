"""A folder of text files to topics: count the words, fit an HDP, print the
largest topics with their coherence.

    python examples/text_to_topics.py DIR_OR_FILE [--lines] [--min-df 2] [--max-df 0.5]

Each file below DIR is one document (``--lines``: each line of the file is).
The number of topics is inferred (HDP, collapsed variational inference,
truncated at ``--max-topics``); topics are printed largest first, with the
c_v coherence of their top words over the texts in reading order.
"""
import argparse

from bnpcore import Corpus, hdp
from bnpcore.evaluation import coherence
from bnpcore.text import read_texts, tokenize


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="a folder of text files, or one file (see --lines)")
    p.add_argument("--lines", action="store_true", help="one document per line")
    p.add_argument("--min-df", type=float, default=2, help="drop words in fewer documents (default 2)")
    p.add_argument("--max-df", type=float, default=0.5, help="drop words in more than this fraction (default 0.5)")
    p.add_argument("--max-topics", type=int, default=40, help="truncation of the HDP (default 40)")
    p.add_argument("--show", type=int, default=10, help="topics to print (default 10)")
    args = p.parse_args(argv)

    texts = list(read_texts(args.path, lines=args.lines))
    min_df = int(args.min_df) if args.min_df >= 1 else args.min_df
    corpus = Corpus.from_texts(texts, min_df=min_df, max_df=args.max_df)
    print(f"{corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens")

    model = hdp.CollapsedVB(n_components=args.max_topics, random_state=0).fit(corpus)

    # c_v slides a window over the text: give it the tokens in reading order
    # (those of the vocabulary), not the bags of words
    vocabulary = set(corpus.vocabulary)
    tokens = [[t for t in tokenize(text) if t in vocabulary] for text in texts]
    n = min(args.show, model.n_components_)
    scores = coherence([model.top_words(k, 10) for k in range(n)], tokens, measure="c_v", per_topic=True)
    print(f"{model.n_components_} topics; the {n} largest (weight, c_v coherence, top words):")
    for k in range(n):
        print(f"  {k:3d}  {model.weights_[k]:.3f}  {scores[k]:.2f}  {' '.join(model.top_words(k, 8))}")
    return model, scores


if __name__ == "__main__":
    main()
