#include "core/encodings/registry.h"

#include "core/encodings/learned.h"
#include "core/encodings/none.h"
#include "core/encodings/sinusoidal.h"

namespace pelab {

namespace {

// A scheme class provides description(), options() and a (context, options) constructor.
template <typename Scheme>
SchemeEntry entry(const std::string& name) {
  return {{name, Scheme::description(), Scheme::options()},
          [](const EncodingContext& context, const OptionValues& options) {
            // TORCH_MODULE holders of a base class take a shared_ptr of that base.
            std::shared_ptr<PositionEncodingImpl> impl = std::make_shared<Scheme>(context, options);
            return PositionEncoding(impl);
          }};
}

}  // namespace

const std::vector<SchemeEntry>& scheme_registry() {
  static const std::vector<SchemeEntry> table = {
      entry<LearnedPositionEncodingImpl>("learned"),
      entry<NoPositionEncodingImpl>("none"),
      entry<SinusoidalPositionEncodingImpl>("sinusoidal"),
  };
  return table;
}

PositionEncoding make_position_encoding(const std::string& name, const EncodingContext& context,
                                        const OptionValues& options) {
  return find_factory(scheme_registry(), name, "position encoding")(context, options);
}

}  // namespace pelab
