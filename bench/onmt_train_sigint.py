"""OpenNMT-py's own `onmt_train`, but on SIGINT (time budget reached) it saves the current weights.

Joey NMT saves a checkpoint when interrupted; OpenNMT-py does not, so this wrapper catches the
KeyboardInterrupt in the training loop and calls OpenNMT-py's ModelSaver, as in the peers' notes.
Run it with the OpenNMT-py environment's python: `python onmt_train_sigint.py -config FILE`.
"""

import onmt.trainer
from onmt.bin.train import main
from onmt.utils.logging import logger

_original_train = onmt.trainer.Trainer.train


def _train_saving_on_interrupt(self, *args, **kwargs):
    """Train; on KeyboardInterrupt save a checkpoint at the last completed step and return."""
    try:
        return _original_train(self, *args, **kwargs)
    except KeyboardInterrupt:
        step = self.optim.training_step - 1
        logger.info("Interrupted (wall-clock budget); saving checkpoint at completed step %d", step)
        if self.model_saver is not None:
            self.model_saver.save(step, moving_average=self.moving_average)
        return None


if __name__ == "__main__":
    onmt.trainer.Trainer.train = _train_saving_on_interrupt
    main()
