#include "data/tasks/expression.h"

namespace pelab::expression {

namespace {
int64_t modulo(int64_t a, int64_t m) { return ((a % m) + m) % m; }
Piece digit(int64_t d) { return {true, d, Token::Plus}; }
Piece token(Token t) { return {false, 0, t}; }
}  // namespace

Expression generate(int64_t n, int64_t modulus, bool multiplication, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> draw_digit(0, modulus - 1);
  Expression e;
  if (n <= 4) {
    const int64_t d = draw_digit(rng);
    const bool negated = n == 2 || n == 4, bracketed = n >= 3;
    if (bracketed) e.pieces.push_back(token(Token::Open));
    if (negated) e.pieces.push_back(token(Token::Minus));
    e.pieces.push_back(digit(d));
    if (bracketed) e.pieces.push_back(token(Token::Close));
    e.value = modulo(negated ? -d : d, modulus);
    return e;
  }
  std::uniform_int_distribution<int64_t> left_length(1, n - 4);
  const int64_t left_n = left_length(rng);
  Expression left = generate(left_n, modulus, multiplication, rng);
  Expression right = generate(n - 3 - left_n, modulus, multiplication, rng);
  std::uniform_int_distribution<int64_t> draw_op(0, multiplication ? 2 : 1);
  const Token op = std::vector<Token>{Token::Plus, Token::Minus, Token::Times}[draw_op(rng)];
  e.pieces.push_back(token(Token::Open));
  e.pieces.insert(e.pieces.end(), left.pieces.begin(), left.pieces.end());
  e.pieces.push_back(token(op));
  e.pieces.insert(e.pieces.end(), right.pieces.begin(), right.pieces.end());
  e.pieces.push_back(token(Token::Close));
  const int64_t combined = op == Token::Plus ? left.value + right.value
                           : op == Token::Minus ? left.value - right.value
                                                : left.value * right.value;
  e.value = modulo(combined, modulus);
  return e;
}

std::vector<int64_t> to_ids(const Expression& expression, const TokenIds& ids) {
  std::vector<int64_t> out;
  for (const auto& p : expression.pieces) {
    if (p.is_digit) {
      out.push_back(p.digit);
      continue;
    }
    switch (p.token) {
      case Token::Plus: out.push_back(ids.plus); break;
      case Token::Minus: out.push_back(ids.minus); break;
      case Token::Times: out.push_back(ids.times); break;
      case Token::Open: out.push_back(ids.open); break;
      case Token::Close: out.push_back(ids.close); break;
    }
  }
  return out;
}

}  // namespace pelab::expression
