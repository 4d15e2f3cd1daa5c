"""Text to an HDP, its summary, an LDA for new documents and a pyLDAvis page.

    python examples/hdp_to_pyldavis.py DIR_OR_FILE [--lines] [--html topics.html]

Each file below DIR is one document (``--lines``: each line of the file is).
The HDP (truncation-free SVI) decides how many topics to use; the summary
lists them by size with their c_v coherence over the texts in reading order;
``to_lda()`` turns them into an LDA that infers the topics of documents it has
never seen; ``--html`` writes the pyLDAvis page (``pip install pyLDAvis``).
"""
import argparse

from bnpcore import Corpus, hdp
from bnpcore.text import read_texts, tokenize


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="a folder of text files, or one file (see --lines)")
    p.add_argument("--lines", action="store_true", help="one document per line")
    p.add_argument("--min-df", type=int, default=2, help="drop words in fewer documents (default 2)")
    p.add_argument("--epochs", type=int, default=5, help="passes over the documents (default 5)")
    p.add_argument("--show", type=int, default=10, help="topics to print (default 10)")
    p.add_argument("--html", help="write the pyLDAvis page here")
    args = p.parse_args(argv)

    texts = list(read_texts(args.path, lines=args.lines))
    corpus = Corpus.from_texts(texts, min_df=args.min_df)
    # gamma = 1 ([TF]'s setting): the default gamma = 30 is tuned for corpora of thousands of documents
    model = hdp.TruncationFreeSVI(gamma=1.0, batch_size=min(100, corpus.n_docs), n_epochs=args.epochs,
                                  random_state=0).fit(corpus)

    vocabulary = set(corpus.vocabulary)       # c_v reads the tokens in reading order
    tokens = [[t for t in tokenize(text) if t in vocabulary] for text in texts]
    summary = model.summary(args.show, corpus=tokens, measure="c_v", n_words=8)
    print(f"{len(model.used_components())} topics used of {model.n_components_}; the largest:")
    print(summary)

    lda = model.to_lda()                      # ready for new documents: lda.transform(new_corpus)
    print(f"as LDA: {lda.n_components_} topics, held-out score on the texts {lda.score(corpus):.3f}/word")

    if args.html:
        import pyLDAvis
        pyLDAvis.save_html(pyLDAvis.prepare(**model.export_pyldavis(corpus), n_jobs=1), args.html)
        print(f"wrote {args.html}")
    return model, summary


if __name__ == "__main__":
    main()
