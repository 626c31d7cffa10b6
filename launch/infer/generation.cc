#include "launch/infer/generation.h"

#include "data/vocab.h"
#include "runtime/check.h"

namespace pf {

GeneratedProtein generate_protein(RecurrentPerformer& model, const std::vector<uint8_t>& prompt,
                                  const GenerateOptions& options, uint64_t protein) {
  PF_REQUIRE(ValueError, model.batch() == 1, "generate_protein runs one stream, the model has " << model.batch());
  PF_REQUIRE(ConfigError, options.max_length >= 0, "--max-length must be >= 0, got " << options.max_length);
  const int64_t V = Vocab::kSize;
  std::vector<float> logits(static_cast<size_t>(V));
  GeneratedProtein out;
  out.prompt_length = static_cast<int64_t>(prompt.size());
  out.residues.reserve(prompt.size() + 64);
  model.reset(0);
  int32_t token = Vocab::kEnd;
  size_t first = 0;
  if (!options.leading_end) {
    PF_REQUIRE(ConfigError, !prompt.empty(),
               "this model never predicts a protein's first residue (trained with data.mode = packed or single): "
               "generation starts from a prompt of at least one residue");
    token = prompt[0];
    out.residues.push_back(Vocab::residue_letter(prompt[0]));
    first = 1;
  }
  for (size_t i = first; i < prompt.size(); ++i) {
    model.step(&token, nullptr);
    token = prompt[i];
    out.residues.push_back(Vocab::residue_letter(prompt[i]));
  }
  // A protein has at least one residue: <end> is not drawn before the first
  // (a record of no residues is no FASTA record any reader takes).
  SamplingOptions first_residue = options.sampling;
  first_residue.allow_end = false;
  for (int64_t t = 0; t < options.max_length; ++t) {
    model.step(&token, logits.data());
    token = sample_token(logits.data(), V, out.residues.empty() ? first_residue : options.sampling,
                         sampling_uniform(options.seed, protein, static_cast<uint64_t>(t)));
    if (token == Vocab::kEnd) {
      out.ended = true;
      break;
    }
    out.residues.push_back(Vocab::residue_letter(static_cast<uint8_t>(token)));
  }
  return out;
}

OutputKind generated_fasta_kind() {
  return {"a FASTA file of performer-generate", [](const std::string& path) {
            const std::string line = first_line_of(path);
            return line.rfind('>', 0) == 0 && line.find(" stop=") != std::string::npos &&
                   line.find(" prompt_length=") != std::string::npos && line.find(" seed=") != std::string::npos;
          }};
}

}  // namespace pf
