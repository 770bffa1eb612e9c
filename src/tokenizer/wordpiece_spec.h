// Reading a WordPiece vocabulary's options: from a tokenizer.json (model,
// normalizer, pre-tokenizer, decoder) and from a GGUF "bert" vocabulary,
// whose token texts follow llama.cpp's converter.
#pragma once

#include "loader/json_file.h"
#include "tokenizer/tokenizer.h"

namespace exactly {

// The WordPiece model's options, BertNormalizer, BertPreTokenizer and
// WordPiece decoder of a tokenizer.json into spec.wordpiece, and its unknown
// token into spec.unk (spec.tokens already read). Throws FileFormatError
// naming the key of anything missing or unsupported.
void read_wordpiece_json(const JsonObject& root, const JsonObject& model, TokenizerSpec& spec);

// A GGUF "bert" vocabulary as a tokenizer.json has it. The converter marks a
// word's first token with a leading U+2581 and writes a continuing token
// without its "##"; tokens in brackets ("[CLS]") are left as they are. GGUF
// keeps no normalizer options: the vocabulary is taken as uncased (lowercase
// and strip accents, BertNormalizer's defaults) when lowercasing changes none
// of its tokens, as cased (neither) otherwise.
void read_wordpiece_gguf(TokenizerSpec& spec);

}  // namespace exactly
