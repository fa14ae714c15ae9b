#include "core/encodings/registry.h"

#include "core/encodings/alibi.h"
#include "core/encodings/cope.h"
#include "core/encodings/dape.h"
#include "core/encodings/deberta.h"
#include "core/encodings/dynamic_position_bias.h"
#include "core/encodings/fire.h"
#include "core/encodings/fope.h"
#include "core/encodings/fox.h"
#include "core/encodings/hard_alibi.h"
#include "core/encodings/kerple.h"
#include "core/encodings/learned.h"
#include "core/encodings/none.h"
#include "core/encodings/path.h"
#include "core/encodings/pope.h"
#include "core/encodings/relative_key.h"
#include "core/encodings/relative_key_query.h"
#include "core/encodings/rope.h"
#include "core/encodings/shaw.h"
#include "core/encodings/sinusoidal.h"
#include "core/encodings/stick_breaking.h"
#include "core/encodings/t5_bias.h"
#include "core/encodings/transformer_xl.h"
#include "core/encodings/tupe.h"
#include "core/encodings/xpos.h"

namespace pelab {

namespace {

// A scheme class provides description(), options() and a (context, options) constructor.
template <typename Scheme>
SchemeEntry entry(const std::string& name) {
  return {{name, Scheme::description(), Scheme::options(), Scheme::causal_only(), {}},
          [name](EncodingContext context, const OptionValues& options) {
            context.scheme = name;
            // TORCH_MODULE holders of a base class take a shared_ptr of that base.
            std::shared_ptr<PositionEncodingImpl> impl = std::make_shared<Scheme>(context, options);
            return PositionEncoding(impl);
          }};
}

}  // namespace

namespace {

std::vector<SchemeEntry> built_in_schemes() {
  return {
      entry<AlibiImpl>("alibi"),
      entry<CopeImpl>("cope"),
      entry<DapeImpl>("dape"),
      entry<DebertaImpl>("deberta"),
      entry<DynamicPositionBiasImpl>("dynamic_position_bias"),
      entry<FireImpl>("fire"),
      entry<FopeImpl>("fope"),
      entry<FoxImpl>("fox"),
      entry<HardAlibiImpl>("hard_alibi"),
      entry<KerpleImpl>("kerple"),
      entry<LearnedPositionEncodingImpl>("learned"),
      entry<NoPositionEncodingImpl>("none"),
      entry<PathImpl>("path"),
      entry<PopeImpl>("pope"),
      entry<RelativeKeyImpl>("relative_key"),
      entry<RelativeKeyQueryImpl>("relative_key_query"),
      entry<RopeImpl>("rope"),
      entry<ShawImpl>("shaw"),
      entry<SinusoidalPositionEncodingImpl>("sinusoidal"),
      entry<StickBreakingImpl>("stick_breaking"),
      entry<T5BiasImpl>("t5_bias"),
      entry<TransformerXLImpl>("transformer_xl"),
      entry<TupeImpl>("tupe"),
      entry<XposImpl>("xpos"),
  };
}

// The built-in schemes (the first `built_in` entries), then the added ones. Added only while
// configs are loaded, before any run builds a scheme from it.
struct Registry {
  std::vector<SchemeEntry> table = built_in_schemes();
  size_t built_in = table.size();
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const std::vector<SchemeEntry>& scheme_registry() { return registry().table; }

bool is_built_in_scheme(const std::string& name) {
  const Registry& r = registry();
  for (size_t i = 0; i < r.built_in; ++i)
    if (r.table[i].info.name == name) return true;
  return false;
}

void add_scheme(SchemeEntry entry) {
  if (is_built_in_scheme(entry.info.name))
    throw std::invalid_argument("scheme name '" + entry.info.name + "' is a built-in scheme's; give the class another name");
  auto& table = registry().table;
  for (auto& existing : table)
    if (existing.info.name == entry.info.name) {
      existing = std::move(entry);
      return;
    }
  table.push_back(std::move(entry));
}

PositionEncoding make_position_encoding(const std::string& name, const EncodingContext& context,
                                        const OptionValues& options) {
  return find_factory(scheme_registry(), name, "position encoding")(context, options);
}

}  // namespace pelab
