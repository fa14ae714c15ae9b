// Random modular-arithmetic expressions with brackets, as neural_networks_chomsky_hierarchy
// tasks/dcf/modular_arithmetic_brackets.py generates them (shared with solve_equation):
// an expression of exactly n tokens, n = 1: d; 2: -d; 3: (d); 4: (-d); n >= 5:
// ( left op right ) with |left| ~ U[1, n - 4], |right| = n - 3 - |left|, op ~ U{+, -(, *)}.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace pelab::expression {

enum class Token : int64_t { Plus, Minus, Times, Open, Close };

struct Piece {
  bool is_digit;
  int64_t digit;  // when is_digit
  Token token;    // otherwise
};

struct Expression {
  std::vector<Piece> pieces;
  int64_t value = 0;  // in [0, modulus)
};

Expression generate(int64_t tokens, int64_t modulus, bool multiplication, std::mt19937_64& rng);

// A task's ids of the operator and bracket tokens (digits keep their value).
struct TokenIds {
  int64_t plus, minus, times, open, close;
};
// The expression's token ids.
std::vector<int64_t> to_ids(const Expression& expression, const TokenIds& ids);

}  // namespace pelab::expression
