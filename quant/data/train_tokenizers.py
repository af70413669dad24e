#!/usr/bin/python3
"""How quant/data/*_tokenizer.model were made (run once; the outputs are committed because
SentencePiece training is not guaranteed to be identical across versions).

Corpus: text that ships with Debian 12 (licenses, package copyright files and READMEs).
Settings follow the Needle tokenizer: BPE, ids 0-3 = pad/eos/bos/unk, the ten chat markers
as user-defined symbols 4-13, byte fallback, identity normalization, extra whitespace kept,
dummy prefix. sentencepiece 0.1.97 (Debian python3-sentencepiece).
"""
import glob, subprocess, sentencepiece as spm

MARKERS = ['<|im_start|>', '<|im_end|>', '<think>', '</think>', '<tools>', '</tools>',
           '<tool_call>', '</tool_call>', '<tool_result>', '</tool_result>']

def corpus(path='corpus.txt'):
    files = sorted(glob.glob('/usr/share/common-licenses/*'))
    files += sorted(glob.glob('/usr/share/doc/*/copyright'))[:3000]
    with open(path, 'w', encoding='utf-8') as out:
        for f in files:
            try:
                text = open(f, encoding='utf-8', errors='ignore').read()
            except OSError:
                continue
            out.write('\n'.join(l for l in text.splitlines() if l.strip()) + '\n')
    return path

if __name__ == '__main__':
    src = corpus()
    for name, vocab in [('needle2', 8192), ('small', 512)]:
        spm.SentencePieceTrainer.train(
            input=src, model_prefix=f'{name}_tokenizer', model_type='bpe', vocab_size=vocab,
            pad_id=0, eos_id=1, bos_id=2, unk_id=3, user_defined_symbols=MARKERS,
            byte_fallback=True, normalization_rule_name='identity',
            remove_extra_whitespaces=False, add_dummy_prefix=True,
            input_sentence_size=2000000, shuffle_input_sentence=False,
            character_coverage=0.9995, max_sentence_length=8192, minloglevel=2)
