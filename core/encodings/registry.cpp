#include "core/encodings/registry.h"

#include "core/encodings/alibi.h"
#include "core/encodings/cope.h"
#include "core/encodings/deberta.h"
#include "core/encodings/fire.h"
#include "core/encodings/fope.h"
#include "core/encodings/fox.h"
#include "core/encodings/kerple.h"
#include "core/encodings/learned.h"
#include "core/encodings/none.h"
#include "core/encodings/path.h"
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

const std::vector<SchemeEntry>& scheme_registry() {
  static const std::vector<SchemeEntry> table = {
      entry<AlibiImpl>("alibi"),
      entry<CopeImpl>("cope"),
      entry<DebertaImpl>("deberta"),
      entry<FireImpl>("fire"),
      entry<FopeImpl>("fope"),
      entry<FoxImpl>("fox"),
      entry<KerpleImpl>("kerple"),
      entry<LearnedPositionEncodingImpl>("learned"),
      entry<NoPositionEncodingImpl>("none"),
      entry<PathImpl>("path"),
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
  return table;
}

PositionEncoding make_position_encoding(const std::string& name, const EncodingContext& context,
                                        const OptionValues& options) {
  return find_factory(scheme_registry(), name, "position encoding")(context, options);
}

}  // namespace pelab
