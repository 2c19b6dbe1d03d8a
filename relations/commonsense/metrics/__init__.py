"""Captioning metrics (PTB tokenisation, BLEU, METEOR, CIDEr-D, diversity) equal to pycocoevalcap 1.2."""
