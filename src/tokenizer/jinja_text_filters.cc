#include "tokenizer/jinja_builtins.h"
