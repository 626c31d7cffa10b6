"""transformers model of an exported Performer protein model:
    AutoModel.from_pretrained(FOLDER, trust_remote_code=True)
wraps performer_protein.PerformerProtein (which must be installed) with the
folder's weights; forward(input_ids, positions=None, segments=None,
labels=None) returns the logits (and, with labels, the mean cross-entropy
over labels != -100 and != -1)."""

from dataclasses import dataclass
from typing import Optional

import torch
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from performer_protein import ModelConfig, PerformerProtein
from performer_protein.export import load_pretrained

from .configuration_performer_protein import PerformerProteinConfig


@dataclass
class PerformerProteinOutput(ModelOutput):
    loss: Optional[torch.FloatTensor] = None
    logits: torch.FloatTensor = None


class PerformerProteinModel(PreTrainedModel):
    config_class = PerformerProteinConfig
    base_model_prefix = "performer"

    def __init__(self, config):
        super().__init__(config)
        self.performer = PerformerProtein(ModelConfig.from_dict(config.performer))

    def _init_weights(self, module):
        pass  # the weights always come from the export folder

    @classmethod
    def from_pretrained(cls, folder, *args, config=None, **kwargs):
        # The folder's tensors carry the trainer's names; the package loads
        # them (and checks every name, shape and value against config.json
        # before it builds the model) instead of a state dict: first, so that
        # no model is built from a config.json its tensors do not match.
        performer = load_pretrained(str(folder))
        if config is None or not isinstance(config, PerformerProteinConfig):
            config = PerformerProteinConfig.from_pretrained(folder)
        model = cls(config)
        model.performer = performer
        model.eval()
        return model

    def forward(self, input_ids, positions=None, segments=None, labels=None, **kwargs):
        logits = self.performer(input_ids, positions, segments)
        loss = None
        if labels is not None:
            labels = labels.masked_fill(labels == -100, -1)
            total, count = self.performer.loss_sum(logits, labels)
            loss = total / max(count, 1)
        return PerformerProteinOutput(loss=loss, logits=logits)
